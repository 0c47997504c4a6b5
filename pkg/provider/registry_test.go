package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// stub is a provider that does nothing, for the registry's tests.
type stub struct{ cfg provider.Config }

func (*stub) Up(context.Context, *provider.Desired) (*provider.Running, error) { return nil, nil }
func (*stub) AfterDeploy(context.Context) error                                { return nil }
func (*stub) Down(context.Context, bool) error                                 { return nil }

func init() {
	provider.Register("local", func(cfg provider.Config) (provider.Provider, error) { return &stub{cfg: cfg}, nil })
}

func TestNameOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *v1alpha1.Provider
		want string
		err  string
	}{
		{name: "none", want: provider.DefaultName},
		{name: "empty", spec: &v1alpha1.Provider{}, want: provider.DefaultName},
		{name: "local", spec: &v1alpha1.Provider{Local: &v1alpha1.LocalProvider{}}, want: "local"},
		{name: "aws", spec: &v1alpha1.Provider{AWS: &v1alpha1.AWSProvider{}}, want: "aws"},
		{name: "two", spec: &v1alpha1.Provider{Local: &v1alpha1.LocalProvider{}, AWS: &v1alpha1.AWSProvider{}}, err: "spec.provider sets aws and local: expected exactly one provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := provider.NameOf(tc.spec)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("NameOf = %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NameOf = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	p, err := provider.New(provider.Config{ClusterName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := p.(*stub); !ok || s.cfg.ClusterName != "demo" {
		t.Errorf("New without spec.provider = %#v, want the default provider's, with the config", p)
	}
	// An unknown provider names the ones this binary knows.
	_, err = provider.New(provider.Config{ClusterName: "demo", Spec: &v1alpha1.Provider{AWS: &v1alpha1.AWSProvider{}}})
	if err == nil || err.Error() != `unknown provider "aws": this kubeplug knows local` {
		t.Errorf("New(aws) error = %v", err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "local registered twice") {
			t.Errorf("recover() = %v, want a panic naming local", r)
		}
	}()
	provider.Register("local", nil)
}

// awsOption is a setting of a provider ("aws") other than the registered one.
type awsOption struct{}

func (awsOption) Provider() string { return "aws" }
func (awsOption) String() string   { return "--aws-thing" }

type localOption struct{}

func (localOption) Provider() string { return "local" }
func (localOption) String() string   { return "--local-thing" }

// TestNewOptions: a typed option reaches its provider's factory; one of another
// provider is an error naming it, never ignored.
func TestNewOptions(t *testing.T) {
	p, err := provider.New(provider.Config{ClusterName: "demo", Options: []provider.Option{localOption{}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(*stub); len(s.cfg.Options) != 1 || s.cfg.Options[0] != (localOption{}) {
		t.Errorf("the factory got options %v", s.cfg.Options)
	}
	_, err = provider.New(provider.Config{ClusterName: "demo", Options: []provider.Option{awsOption{}}})
	if err == nil || err.Error() != "--aws-thing is a setting of the aws provider, and this cluster's provider is local" {
		t.Errorf("New with another provider's option: %v", err)
	}
}

// TestFlagOptions: a provider's option is set through its registered flag, as
// `kubeplug up` sets it, by a program that does not import the provider; a
// flag no linked provider defines is an error naming it.
func TestFlagOptions(t *testing.T) {
	provider.RegisterFlags(func(fs *pflag.FlagSet, opts *[]provider.Option) func(bool) error {
		provider.BoolOptionVar(fs, opts, localOption{}, "local-thing", "")
		return nil
	})
	opts, err := provider.FlagOptions("--local-thing")
	if err != nil || len(opts) != 1 || opts[0] != (localOption{}) {
		t.Errorf("FlagOptions(--local-thing) = %v, %v", opts, err)
	}
	if opts, err := provider.FlagOptions(); err != nil || len(opts) != 0 {
		t.Errorf("FlagOptions() = %v, %v", opts, err)
	}
	_, err = provider.FlagOptions("--accept-new-host-keys")
	if err == nil || !strings.Contains(err.Error(), "unknown flag: --accept-new-host-keys") || !strings.Contains(err.Error(), "this program links [local]") {
		t.Errorf("FlagOptions of a provider not linked: %v", err)
	}
}

package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/stage"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// Name is the local provider's name in the registry and in spec.provider.
const Name = "local"

func init() {
	provider.RegisterFacts(Name, facts)
	provider.RegisterSteps(Name, Steps())
	provider.Register(Name, func(cfg provider.Config) (provider.Provider, error) {
		opts := Options{StateDir: cfg.StateDir, ClusterName: cfg.ClusterName, Events: cfg.Events, Logger: cfg.Logger}
		if cfg.Spec != nil && cfg.Spec.Local != nil {
			opts.APIServerPort = cfg.Spec.Local.APIServerPort
			opts.RealPools = cfg.Spec.Local.RealPools
			opts.MachinePools = cfg.Spec.Local.MachinePools
		}
		for _, o := range cfg.Options {
			switch o := o.(type) {
			case BuildFromSource:
				opts.BuildFromSource = true
			case *RestoreFrom:
				opts.RestoreFrom, opts.RestoreForce = o.File, o.Force
			}
		}
		return New(opts)
	})
	provider.RegisterFlags(defineFlags)
}

// defineFlags defines up's flags of the local provider: --build-from-source,
// and --restore-from with its --force.
func defineFlags(fs *pflag.FlagSet, opts *[]provider.Option) func(run bool) error {
	provider.BoolOptionVar(fs, opts, BuildFromSource{}, "build-from-source", "local provider: run only Kubernetes binaries built from Go modules, never the cache or a download (also $"+BuildFromSourceEnv+")")
	r := &RestoreFrom{}
	fs.Var(restoreFile{r: r, opts: opts}, "restore-from", "local provider: bring the cluster back from this etcd snapshot (kubeplug etcd snapshot) before its control plane starts; refused onto a cluster that exists unless --force")
	fs.Var(restoreForce{r}, "force", "with --restore-from: replace the etcd data of a cluster that exists (running or stopped); its old data is kept aside")
	fs.Lookup("force").NoOptDefVal = "true"
	return func(run bool) error {
		switch {
		case r.Force && r.File == "":
			return errors.New("--force goes with --restore-from: it lets a restore replace the etcd data of a cluster that exists")
		case r.File != "" && !run:
			return errors.New("--restore-from with --dry-run: a dry run restores nothing; drop one of them")
		}
		return nil
	}
}

// restoreFile is --restore-from: it adds the option, with the file's
// absolute path, the first time it is set.
type restoreFile struct {
	r    *RestoreFrom
	opts *[]provider.Option
}

func (f restoreFile) String() string { return f.r.File }
func (restoreFile) Type() string     { return "string" }

func (f restoreFile) Set(v string) error {
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	if f.r.File == "" {
		*f.opts = append(*f.opts, f.r)
	}
	f.r.File = abs
	return nil
}

// restoreForce is --force, a field of the --restore-from option.
type restoreForce struct{ r *RestoreFrom }

func (f restoreForce) String() string { return strconv.FormatBool(f.r.Force) }
func (restoreForce) Type() string     { return "bool" }

func (f restoreForce) Set(v string) error {
	b, err := strconv.ParseBool(v)
	f.r.Force = b
	return err
}

// BuildFromSource is the provider.Option of Options.BuildFromSource (up's
// --build-from-source).
type BuildFromSource struct{}

// Provider implements provider.Option.
func (BuildFromSource) Provider() string { return Name }

func (BuildFromSource) String() string { return "--build-from-source" }

// RestoreFrom is the provider.Option of Options.RestoreFrom and
// Options.RestoreForce (up's --restore-from and --force).
type RestoreFrom struct {
	File  string
	Force bool
}

// Provider implements provider.Option.
func (*RestoreFrom) Provider() string { return Name }

func (*RestoreFrom) String() string { return "--restore-from" }

var (
	_ provider.Locator  = (*Provider)(nil)
	_ provider.Stateful = (*Provider)(nil)
)

// Locate returns the kubeconfig of the cluster of the state dir while it runs.
func (p *Provider) Locate(ctx context.Context) (string, error) {
	ok, err := Running(ctx, p.opts.StateDir)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("cluster %s (state dir %s): %w", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	}
	return Kubeconfig(p.opts.StateDir), nil
}

var (
	_ provider.VersionChecker = (*Provider)(nil)
	_ provider.FactSource     = (*Provider)(nil)
)

// facts are the local provider's cluster facts: its control plane runs with the
// control-plane plugin's flags, so the API endpoint is that plugin's machine
// address and port (up sets them before the plan is made); its machines get the
// bridge CNI configuration and the control-plane Node its role label. The
// machines' network is chosen at up, so ClusterCIDR stays empty.
func facts(_ *v1alpha1.Cluster, values func(string) map[string]any, f *stage.Facts) {
	f.APIEndpoint = provider.ControlPlaneEndpoint(values)
	f.CNI = "bridge"
	f.NodeRoles[model.RoleControlPlane] = ControlPlaneRoleLabel
}

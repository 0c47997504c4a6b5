package aws

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	_ "github.com/kubeplug/kubeplug/pkg/nodeagent/s3fetch" // its machines' `kubeplug node fetch-secrets` reads s3://
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Name is the provider's name in the registry and its key in spec.provider.
const Name = "aws"

// StateFileName is the state file's name in the cluster's state directory.
const StateFileName = "aws.json"

// maxParameter is the largest parameter value CloudFormation takes.
const maxParameter = 4096

func init() {
	provider.Register(Name, newProvider)
	provider.RegisterFacts(Name, facts)
}

// facts are the aws provider's cluster facts: the machines' network is the
// VPC's range the template creates (empty for an existing VPC, whose range
// kubeplug does not read). The API endpoint is the load balancer's, known
// only once the core stack is deployed (its APIServerEndpoint output, in
// model.Deployed); the machines get no CNI and no role labels from kubeplug.
func facts(cl *v1alpha1.Cluster, pluginValues func(string) map[string]any, f *stage.Facts) {
	cv, err := decodeCoreValues(pluginValues(CloudPlugin))
	if err != nil {
		return // the template reports it
	}
	if v := values(cl.Spec.Provider, cv); v.VPCID == "" {
		f.ClusterCIDR = v.VPCCIDR
	}
}

// Provider is the aws provider: Up deploys the rendered files and stacks with a
// Deployer and uploads the machines' boot secrets (bootsecrets.go), Down
// destroys what it deployed. The machines fetch their boot secrets at boot,
// and the control-plane machine stores the workers' bootstrap token
// (docs/aws.md). Up does not wait for them, and the Running it returns has no
// RESTConfig, so kubeplug up stops before the steps that need the cluster's
// API server.
type Provider struct {
	opts     Options
	stateDir string
	events   func(provider.Event)
}

var (
	_ provider.Provider     = (*Provider)(nil)
	_ provider.Stateful     = (*Provider)(nil)
	_ provider.FileDeployer = (*Provider)(nil)
	_ provider.Previewer    = (*Provider)(nil)
	_ provider.CloudDrifter = (*Provider)(nil)
)

// newProvider checks spec.provider.aws and starts nothing.
func newProvider(cfg provider.Config) (provider.Provider, error) {
	if err := specError(cfg.Spec); err != nil {
		return nil, err
	}
	spec := &v1alpha1.AWSProvider{}
	if cfg.Spec != nil && cfg.Spec.AWS != nil {
		spec = cfg.Spec.AWS
	}
	dir := cfg.StateDir
	if dir == "" {
		var err error
		if dir, err = DefaultStateDir(cfg.ClusterName); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &Provider{stateDir: dir, events: cfg.Events}
	p.opts = Options{
		ClusterName: cfg.ClusterName, Region: spec.Region, Profile: spec.Profile, Endpoint: spec.Endpoint,
		Bucket: spec.Bucket, StackPrefix: spec.StackPrefix, Tags: spec.Tags,
		StateFile: filepath.Join(dir, StateFileName), Logger: cfg.Logger, Events: p.event,
	}
	if p.opts, err = p.opts.withDefaults(); err != nil {
		return nil, err
	}
	return p, nil
}

// DefaultStateDir is $XDG_STATE_HOME/kubeplug/clusters/NAME (else under
// ~/.local/state), as for the local provider.
func DefaultStateDir(clusterName string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("default state directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "kubeplug", "clusters", clusterName), nil
}

// StateDir is where the provider keeps its state file.
func (p *Provider) StateDir() string { return p.stateDir }

// DeploysFiles says that Up wants the rendered files.
func (*Provider) DeploysFiles() bool { return true }

func (p *Provider) event(e Event) {
	if p.events == nil {
		return
	}
	msg := e.Message
	if e.Stack != "" {
		msg = e.Stack + ": " + msg
	}
	p.events(provider.Event{Time: e.Time, Step: "aws-" + e.Kind, Message: msg})
}

// Up uploads the rendered files under nodes/ and cloud/ and deploys the core
// stack (cloud/template.json, each pool's user data passed as gzip+base64 of its
// cloud-init.yaml) and the plugins' stacks (cloud/stacks.json), then uploads
// each pool's boot secrets for the core stack's API endpoint and KMS key. It
// returns when every stack settled and the secrets are uploaded, with the
// stacks' outputs; it does not wait for the machines.
func (p *Provider) Up(ctx context.Context, d *provider.Desired) (*provider.Running, error) {
	b, err := BundleOf(d.Model, d.Files)
	if err != nil {
		return nil, err
	}
	if err := checkClear(d); err != nil {
		return nil, err
	}
	dep, err := New(ctx, p.opts)
	if err != nil {
		return nil, err
	}
	res, err := dep.Deploy(ctx, *b)
	if res == nil {
		return nil, err
	}
	if err == nil {
		err = p.uploadBootSecrets(ctx, dep, d, res)
	}
	deployed := &model.Deployed{Stacks: map[string]model.DeployedStack{}, Assets: res.Assets}
	for _, s := range res.Stacks {
		deployed.Stacks[s.Name] = model.DeployedStack{StackName: s.StackName, StackID: s.StackID, Status: s.Status, Outputs: s.Outputs}
	}
	return &provider.Running{Deployed: deployed}, err
}

// uploadBootSecrets uploads each pool's boot secrets (bootsecrets.go) once
// the core stack gave the API server's endpoint and the secrets' KMS key.
func (p *Provider) uploadBootSecrets(ctx context.Context, dep *Deployer, d *provider.Desired, res *Result) error {
	var outputs map[string]string
	for _, s := range res.Stacks {
		if s.Name == render.CoreStack {
			outputs = s.Outputs
		}
	}
	endpoint, keyARN := outputs["APIServerEndpoint"], outputs[bootSecretsKeyOutput]
	if endpoint == "" || keyARN == "" {
		return fmt.Errorf("boot secrets: the core stack has no APIServerEndpoint or %s output: were they patched away?", bootSecretsKeyOutput)
	}
	secrets, err := p.bootSecrets(d, endpoint)
	if err != nil {
		return err
	}
	return dep.putBootSecrets(ctx, secrets, keyARN)
}

// BundleOf makes what Up deploys of a render: every file under nodes/ and cloud/
// as an asset, the core stack with its pools' user data, the plugins' stacks.
func BundleOf(m *model.Model, files map[string][]byte) (*Bundle, error) {
	core, ok := files[render.CoreTemplatePath]
	if !ok || m == nil {
		return nil, fmt.Errorf("the render has no %s to deploy", render.CoreTemplatePath)
	}
	b := &Bundle{}
	for _, path := range sortedKeys(files) {
		if strings.HasPrefix(path, "nodes/") || strings.HasPrefix(path, "cloud/") {
			b.Assets = append(b.Assets, Asset{Path: path, Content: files[path]})
		}
	}
	coreStack := Stack{Name: render.CoreStack, Template: core, Parameters: map[string]string{}}
	for param, path := range render.UserDataParameters(m) {
		f, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("the render has no %s for parameter %s of %s", path, param, render.CoreTemplatePath)
		}
		v, err := userData(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(v) > maxParameter {
			return nil, fmt.Errorf("%s is %d bytes, %d as gzip and base64, more than the %d a CloudFormation parameter (%s) takes: move what the pool's machines need into files of fewer, smaller hooks or units", path, len(f), len(v), maxParameter, param)
		}
		coreStack.Parameters[param] = v
	}
	b.Stacks = append(b.Stacks, coreStack)
	if raw, ok := files[render.StacksPath]; ok {
		idx, err := render.ParseStackIndex(raw)
		if err != nil {
			return nil, err
		}
		for _, e := range idx.Stacks {
			t, ok := files[e.Template]
			if !ok {
				return nil, fmt.Errorf("%s lists %s, which the render lacks", render.StacksPath, e.Template)
			}
			s := Stack{Name: e.Name, By: e.By, Template: t, Parameters: e.Parameters, DependsOn: e.DependsOn, Inputs: map[string]OutputRef{}}
			for param, in := range e.Inputs {
				stack, output, ok := strings.Cut(in, ".")
				if !ok {
					return nil, fmt.Errorf("%s: stack %s: input %s: expected STACK.OUTPUT, found %q", render.StacksPath, e.Name, param, in)
				}
				s.Inputs[param] = OutputRef{Stack: stack, Output: output}
			}
			b.Stacks = append(b.Stacks, s)
		}
	}
	return b, nil
}

// userData is the gzip (which cloud-init unpacks by itself) and base64 (which
// the launch template's UserData wants) of a cloud-init file. gzip without a
// name or time is deterministic, so an unchanged file changes nothing.
func userData(content []byte) (string, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	zw.ModTime = time.Time{}
	if _, err := zw.Write(content); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// Preview says what Up would change in each stack, changing nothing
// (Deployer.Preview).
func (p *Provider) Preview(ctx context.Context, d *provider.Desired) ([]provider.StackPreview, error) {
	b, err := BundleOf(d.Model, d.Files)
	if err != nil {
		return nil, err
	}
	dep, err := New(ctx, p.opts)
	if err != nil {
		return nil, err
	}
	pv, err := dep.Preview(ctx, *b)
	out := make([]provider.StackPreview, 0, len(pv))
	for _, s := range pv {
		sp := provider.StackPreview{Stack: s.StackName, Exists: s.Exists, Changes: []string{}, Note: s.Note}
		for _, c := range s.Changes {
			sp.Changes = append(sp.Changes, c.String())
		}
		out = append(out, sp)
	}
	return out, err
}

// CloudDrift runs CloudFormation's drift detection on the deployed stacks
// (Deployer.Drift). An endpoint that does not detect drift is an error saying so.
func (p *Provider) CloudDrift(ctx context.Context) ([]provider.StackDrift, error) {
	dep, err := New(ctx, p.opts)
	if err != nil {
		return nil, err
	}
	drift, err := dep.Drift(ctx)
	out := make([]provider.StackDrift, 0, len(drift))
	for _, s := range drift {
		sd := provider.StackDrift{Stack: s.StackName, Status: s.Status}
		for _, r := range s.Resources {
			line := fmt.Sprintf("%s (%s) %s", r.LogicalID, r.Type, r.Status)
			if len(r.Properties) > 0 {
				line += ": " + strings.Join(r.Properties, "; ")
			}
			sd.Resources = append(sd.Resources, line)
		}
		out = append(out, sd)
	}
	return out, err
}

// AfterDeploy does nothing: the machines run their own afterDeploy hooks.
func (*Provider) AfterDeploy(context.Context) error { return nil }

// Down deletes what Up deployed, as its state file records it (Destroy): the
// stacks in reverse order, the uploaded files, the bucket when Up created it.
// Without a state file it says the cluster is not running (ErrNotRunning).
// purge also removes the state directory.
func (p *Provider) Down(ctx context.Context, purge bool) error {
	if _, err := os.Stat(p.opts.StateFile); errors.Is(err, os.ErrNotExist) {
		if purge {
			if err := os.RemoveAll(p.stateDir); err != nil {
				return fmt.Errorf("purge %s: %w", p.stateDir, err)
			}
		}
		return fmt.Errorf("%w: no stacks recorded in %s", provider.ErrNotRunning, p.opts.StateFile)
	}
	dep, err := New(ctx, p.opts)
	if err != nil {
		return err
	}
	if err := dep.Destroy(ctx); err != nil {
		return err
	}
	if purge {
		if err := os.RemoveAll(p.stateDir); err != nil {
			return fmt.Errorf("purge %s: %w", p.stateDir, err)
		}
	}
	return nil
}

package engine_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// auditPlugin is a library user's plugin written as a Go value: it runs
// in-process, with no executable and no digest to pin.
type auditPlugin struct{ maxAge string }

func (a auditPlugin) Run(_ context.Context, req *stage.Request) (*stage.Response, error) {
	if req.Stage != stage.Initialise {
		return nil, nil // nothing to do at the other stages
	}
	return &stage.Response{Contribution: &model.Contribution{ControlPlane: &model.ControlPlane{
		Components: map[string]*model.Component{model.KubeAPIServer: {
			Flags: map[string]model.Setting[string]{"audit-log-maxage": {Value: a.maxAge}},
		}},
	}}}, nil
}

// A library user registers a Go value under a plugin's name with
// runtime.Options.InProcess and hands the resolver to the engine as
// Options.Runtimes. The plugin still has a package (its plugin.yaml gives the
// name, version and dependencies), and its Go code runs after the package's
// declarative parts at every stage.
func ExampleOptions_runtimes() {
	ctx := context.Background()
	pkg, l := plugin.Load(fstest.MapFS{"plugin.yaml": {Data: []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: audit, version: 1.0.0}
spec: {}
`)}}, plugin.OriginUser, "plugins/audit")
	if l.HasFatal() {
		fmt.Println(l)
		return
	}
	idx, _ := source.NewIndex([]*plugin.Package{pkg})
	cl, _ := config.Parse("cluster.yaml", []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: demo}
spec:
  kubernetesVersion: 1.36.3
  plugins:
    enabled: [{name: audit}]
`))

	rs := runtime.NewResolver(runtime.Options{InProcess: map[string]stage.Runtime{"audit": auditPlugin{maxAge: "30"}}})
	defer func() { _ = rs.Close() }() // ends the plugin processes the run started (none here)
	e := engine.New(engine.Options{Runtimes: rs})
	plan, l := e.Plan(ctx, cl, idx)
	if plan == nil {
		fmt.Println(l)
		return
	}
	res, l := e.Run(ctx, plan, stage.Validate)
	if l.HasFatal() {
		fmt.Println(l)
		return
	}
	flag := res.Model.ControlPlane.Components[model.KubeAPIServer].Flags["audit-log-maxage"]
	fmt.Printf("--audit-log-maxage=%s (set by %s)\n", flag.Value, flag.By)
	fmt.Println("stages:", res.Stages)
	// Output:
	// --audit-log-maxage=30 (set by audit)
	// stages: [initialise render deploy validate]
}

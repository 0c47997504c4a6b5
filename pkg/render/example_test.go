package render_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/pkg/render"
)

func ExampleFiles() {
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 3})
	m.Add("cni", &model.Contribution{
		Pools: map[string]*model.Pool{"workers": {Kubelet: model.Kubelet{
			Labels: map[string]model.Setting[string]{"example.com/cni": {Value: "demo"}},
		}}},
		Kubernetes: &model.Kubernetes{Objects: []model.Object{{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cni"},
		}}}},
	})
	files, diags := render.Files(context.Background(), render.Input{
		ClusterName: "demo", KubernetesVersion: "1.37.2", Model: m,
		Cloud: aws.Template{}, // the cloud template kubeplug renders, registered by the aws provider
	})
	if diags.HasFatal() {
		fmt.Println(diags)
		return
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Println(name)
	}
	fmt.Print(string(files["kubernetes/00-cni.yaml"]))
	// Output:
	// cloud/template.json
	// control-plane/etcd.yaml
	// control-plane/kube-apiserver.yaml
	// control-plane/kube-controller-manager.yaml
	// control-plane/kube-scheduler.yaml
	// kubernetes/00-cni.yaml
	// nodes/control-plane/cloud-init.yaml
	// nodes/control-plane/ignition.json
	// nodes/workers/cloud-init.yaml
	// nodes/workers/ignition.json
	// apiVersion: v1
	// kind: Namespace
	// metadata:
	//   name: cni
}

package controlplane

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KwokNodeAnnotation marks the Nodes that kwok manages (with value "fake"). A
// Node without it is left alone, so tests can also create Nodes that never
// become Ready.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// DefaultNodeNamePrefix is used when NodeOptions.NamePrefix is empty.
const DefaultNodeNamePrefix = "kwok-node-"

// NodeOptions shape the Nodes AddNodes creates. The zero value is valid.
type NodeOptions struct {
	// NamePrefix is followed by a number, counted per prefix over the life of
	// the ControlPlane. Default: DefaultNodeNamePrefix.
	NamePrefix string
	// Labels are added to the standard ones (kubernetes.io/hostname,
	// kubernetes.io/os=linux, kubernetes.io/arch=amd64, type=kwok) and win over
	// them. Default: none.
	Labels map[string]string
	// Taints are set on the Node's spec. Default: none (every simulated node
	// accepts every Pod).
	Taints []corev1.Taint
	// Capacity is the Node's capacity and allocatable. Default: 32 CPUs, 256Gi
	// memory, 110 pods.
	Capacity corev1.ResourceList
}

// AddNodes creates n Nodes managed by kwok and waits until all are Ready. It
// returns their names in creation order. If ctx ends first, the Nodes already
// created stay (the cluster is throw-away; a test namespace cannot hold Nodes).
func (c *ControlPlane) AddNodes(ctx context.Context, n int, opts NodeOptions) ([]string, error) {
	if n < 0 {
		return nil, fmt.Errorf("add nodes: negative count %d", n)
	}
	prefix := opts.NamePrefix
	if prefix == "" {
		prefix = DefaultNodeNamePrefix
	}
	capacity := opts.Capacity
	if capacity == nil {
		capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	names := make([]string, 0, n)
	for len(names) < n {
		c.mu.Lock()
		i := c.nodeSeq[prefix]
		c.nodeSeq[prefix]++
		c.mu.Unlock()
		name := prefix + strconv.Itoa(i)
		labels := map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kwok",
		}
		maps.Copy(labels, opts.Labels)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      labels,
				Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			},
			Spec: corev1.NodeSpec{Taints: opts.Taints},
			Status: corev1.NodeStatus{
				Capacity:    capacity.DeepCopy(),
				Allocatable: capacity.DeepCopy(),
			},
		}
		_, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			continue // a reused data directory: take the next number
		case err != nil:
			return names, fmt.Errorf("create node %s: %w", name, err)
		}
		names = append(names, name)
	}
	for _, name := range names {
		if err := c.waitNodeReady(ctx, name); err != nil {
			return names, err
		}
	}
	c.log.Info("nodes ready", "count", n, "prefix", prefix)
	return names, nil
}

func (c *ControlPlane) waitNodeReady(ctx context.Context, name string) error {
	return c.poll(ctx, Kwok, "node "+name+" ready", func(ctx context.Context) error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not ready yet", name)
	})
}

package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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
	// KubeletVersion is the version the Node reports as its kubelet's and
	// kube-proxy's (status.nodeInfo), such as "v1.37.1", set when the Node is
	// created. Default: kwok's own ("kwok-0.8.0").
	KubeletVersion string
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
	names := make([]string, 0, n)
	for len(names) < n {
		c.mu.Lock()
		i := c.nodeSeq[prefix]
		c.nodeSeq[prefix]++
		c.mu.Unlock()
		name := prefix + strconv.Itoa(i)
		_, err := c.client.CoreV1().Nodes().Create(ctx, newNode(name, opts), metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			continue // a reused data directory: take the next number
		case err != nil:
			return names, fmt.Errorf("create node %s: %w", name, err)
		}
		names = append(names, name)
	}
	for _, name := range names { // one LIST per poll answers for every Node (readyNodes)
		if err := c.waitNodeReady(ctx, name); err != nil {
			return names, err
		}
	}
	c.log.Info("nodes ready", "count", n, "prefix", prefix)
	return names, nil
}

func (c *ControlPlane) waitNodeReady(ctx context.Context, name string) error {
	return c.poll(ctx, Kwok, "node "+name+" ready", func(ctx context.Context) error {
		ready, err := c.readyNodes(ctx)
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		switch r, ok := ready[name]; {
		case !ok:
			return fmt.Errorf("node %s not found", name)
		case !r:
			return fmt.Errorf("node %s not ready yet", name)
		}
		return nil
	})
}

// nodeList is the last LIST of the Nodes, with when it was asked for.
type nodeList struct {
	mu    sync.Mutex
	asked time.Time
	ready map[string]bool
}

// readyNodes says, by Node name, whether each Node is Ready, as a LIST asked
// for after this call began says: waits for many Nodes at once (a pool of
// hundreds being added) share one LIST per poll, not one GET per Node each.
func (c *ControlPlane) readyNodes(ctx context.Context) (map[string]bool, error) {
	began := time.Now()
	c.nodes.mu.Lock()
	defer c.nodes.mu.Unlock()
	if c.nodes.ready != nil && !c.nodes.asked.Before(began) {
		return c.nodes.ready, nil // a LIST as new as the one this call would make
	}
	asked := time.Now()
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ready := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		ready[n.Name] = slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
	}
	c.nodes.asked, c.nodes.ready = asked, ready
	return ready, nil
}

// ManagedLabelsAnnotation lists, comma-separated, the label keys EnsureNode set
// from NodeOptions.Labels, so that a later EnsureNode removes the ones no longer
// wanted and leaves labels others set alone.
const ManagedLabelsAnnotation = "kubeplug.dev/managed-labels"

// systemTaintPrefix marks the taints that the node lifecycle controller manages
// (not-ready, unreachable, ...); EnsureNode keeps them.
const systemTaintPrefix = "node.kubernetes.io/"

// newNode is a kwok-managed Node with the standard labels, opts.Labels over them,
// and opts' taints and capacity.
func newNode(name string, opts NodeOptions) *corev1.Node {
	capacity := opts.Capacity
	if capacity == nil {
		capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	labels := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	maps.Copy(labels, opts.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
				ManagedLabelsAnnotation:        strings.Join(slices.Sorted(maps.Keys(opts.Labels)), ","),
			},
		},
		Spec: corev1.NodeSpec{Taints: opts.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: opts.KubeletVersion, KubeProxyVersion: opts.KubeletVersion}, //nolint:staticcheck // kwok's stage fills it as a kubelet would
		},
	}
}

// EnsureNode makes the kwok-managed Node name exist with opts' labels and taints
// (opts.NamePrefix is ignored): it creates a missing Node, and on an existing one
// sets opts.Labels, removes the labels an earlier EnsureNode set that opts no
// longer has (see ManagedLabelsAnnotation), and replaces the taints except the
// node lifecycle controller's node.kubernetes.io/ ones, and the kubelet version
// it reports (opts.KubeletVersion, when set). It does not wait for Ready
// (WaitNodeReady does) and reports whether it created the Node.
func (c *ControlPlane) EnsureNode(ctx context.Context, name string, opts NodeOptions) (created bool, err error) {
	want := newNode(name, opts)
	_, err = c.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create node %s: %w", name, err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		next := cur.DeepCopy()
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		for _, k := range strings.Split(cur.Annotations[ManagedLabelsAnnotation], ",") {
			if _, keep := opts.Labels[k]; !keep && k != "" {
				delete(next.Labels, k)
			}
		}
		maps.Copy(next.Labels, opts.Labels)
		next.Annotations[ManagedLabelsAnnotation] = want.Annotations[ManagedLabelsAnnotation]
		var taints []corev1.Taint
		for _, t := range cur.Spec.Taints {
			if strings.HasPrefix(t.Key, systemTaintPrefix) {
				taints = append(taints, t)
			}
		}
		next.Spec.Taints = append(taints, opts.Taints...)
		if equality.Semantic.DeepEqual(cur.ObjectMeta, next.ObjectMeta) && equality.Semantic.DeepEqual(cur.Spec, next.Spec) {
			return nil
		}
		if _, err := c.client.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node %s: %w", name, err)
		}
		return nil
	}); err != nil {
		return false, err
	}
	return false, c.setKubeletVersion(ctx, name, opts.KubeletVersion)
}

// setKubeletVersion makes an existing simulated Node report version as its
// kubelet's and kube-proxy's (after an upgrade): kwok's stages keep what is
// there.
func (c *ControlPlane) setKubeletVersion(ctx context.Context, name, version string) error {
	if version == "" {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		info := &cur.Status.NodeInfo
		if info.KubeletVersion == version && info.KubeProxyVersion == version { //nolint:staticcheck // kwok's stage fills it as a kubelet would
			return nil
		}
		info.KubeletVersion, info.KubeProxyVersion = version, version //nolint:staticcheck // as above
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update the status of node %s: %w", name, err)
		}
		return nil
	})
}

// WaitNodeReady waits until the Node is Ready, ctx is done or kwok exits.
func (c *ControlPlane) WaitNodeReady(ctx context.Context, name string) error {
	return c.waitNodeReady(ctx, name)
}

// DeleteNode deletes a Node; one that does not exist is not an error.
func (c *ControlPlane) DeleteNode(ctx context.Context, name string) error {
	err := c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return nil
}

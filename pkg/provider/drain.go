package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
)

// Cordon marks the Node unschedulable (on) or schedulable again (off).
func Cordon(ctx context.Context, client kubernetes.Interface, node string, on bool) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on))
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if on {
			return fmt.Errorf("cordon: %w", err)
		}
		return fmt.Errorf("uncordon: %w", err)
	}
	return nil
}

// Drain cordons the Node and evicts its Pods through the Eviction API (so
// PodDisruptionBudgets hold), except DaemonSets' and static Pods, and waits
// until they are gone, at most timeout; then it names the Pods still there.
// The machine mode (local) drains a machine before it replaces it, the hosts
// provider a host before it rolls or removes it.
func Drain(ctx context.Context, client kubernetes.Interface, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := Cordon(ctx, client, node, true)
		if err == nil {
			break
		}
		if !transient(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	for {
		left, err := evictPods(ctx, client, node)
		// A PodDisruptionBudget (429, in left) or an API server that timed
		// out (its etcd slow, a control-plane machine just replaced): tried
		// again until the deadline.
		if err != nil && (!transient(err) || time.Now().After(deadline)) {
			return err
		}
		if err == nil && len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: after %s, Pods are still on the node (a PodDisruptionBudget may forbid their eviction): %s", timeout, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// evictPods asks the Eviction API to evict the node's Pods but DaemonSets'
// and static Pods, and returns those still there.
func evictPods(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var left []string
	for _, pod := range pods.Items {
		if daemonOrStatic(&pod) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		left = append(left, pod.Namespace+"/"+pod.Name)
		if pod.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		if err := client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
			return left, fmt.Errorf("evict %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return left, nil
}

// transient says whether an API error may pass by itself: a timeout, an
// internal error (etcd's "request timed out"), an unavailable server, or a
// connection closed or reset under the request (a load balancer taking out
// an API server whose machine is being replaced closes its connections; the
// next request goes to another). A refused connection is not: no API server
// listens there, and a drain waiting its timeout for one helps nobody.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) ||
		strings.Contains(err.Error(), "http2: client connection lost")
}

func daemonOrStatic(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
)

// ErrTargetMissing is returned for an installation whose TargetCluster, or its
// kubeconfig Secret, does not exist.
var ErrTargetMissing = errors.New("target cluster not found")

// The reasons of a TargetCluster's Ready condition.
const (
	ReasonReachable   = "Reachable"
	ReasonUnreachable = "Unreachable"
	// ReasonUnauthorized: the API server answers but refuses the kubeconfig's
	// credentials (revoked, expired). Its installations are retried with
	// backoff; a new kubeconfig in the Secret is used at once.
	ReasonUnauthorized = "Unauthorized"
)

// target is a cluster installations apply to.
type target struct {
	// key names it: "" for the controller's own cluster, else namespace/name of
	// the TargetCluster.
	key    string
	config *rest.Config
	client *kube.Client
	// heads is the cluster's release record heads, shared by every apply
	// there; invalidated whenever the controller takes the cluster's operation
	// lease anew (leases).
	heads *state.Heads
	// object is the TargetCluster (nil for the own cluster), for targetField.
	object *ctrlv1.TargetCluster
}

// targets resolves TargetClusters to REST configs, reusing one per kubeconfig
// Secret version.
type targets struct {
	c    client.Client
	self *rest.Config

	mu    sync.Mutex
	cache map[string]cachedTarget
}

type cachedTarget struct {
	secretVersion string
	config        *rest.Config
	client        *kube.Client
	heads         *state.Heads
}

func newTargets(c client.Client, self *rest.Config) *targets {
	return &targets{c: c, self: rest.CopyConfig(self), cache: map[string]cachedTarget{}}
}

// targetKey names the cluster of an installation in namespace with
// spec.target name: "" for the controller's own cluster, else
// "namespace/name" of the TargetCluster. It is the cluster's key in leases and
// shards.
func targetKey(namespace, name string) string {
	if name == "" {
		return ""
	}
	return namespace + "/" + name
}

// get returns the cluster of an installation in namespace with spec.target name.
func (t *targets) get(ctx context.Context, namespace, name string) (*target, error) {
	if name == "" {
		return t.cached(ctx, "", "", func() (*rest.Config, error) { return rest.CopyConfig(t.self), nil }, nil)
	}
	obj := &ctrlv1.TargetCluster{}
	if err := t.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: TargetCluster %s/%s", ErrTargetMissing, namespace, name)
		}
		return nil, err
	}
	spec := &obj.Spec
	key := spec.KubeconfigSecret.Key
	if key == "" {
		key = "kubeconfig"
	}
	sec := &corev1.Secret{}
	if err := t.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: spec.KubeconfigSecret.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: TargetCluster %s/%s: its kubeconfig Secret %s does not exist", ErrTargetMissing, namespace, name, spec.KubeconfigSecret.Name)
		}
		return nil, err
	}
	raw, ok := sec.Data[key]
	if !ok {
		return nil, fmt.Errorf("%w: TargetCluster %s/%s: Secret %s has no key %q", ErrTargetMissing, namespace, name, sec.Name, key)
	}
	tg, err := t.cached(ctx, namespace+"/"+name, sec.ResourceVersion+"/"+key, func() (*rest.Config, error) {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("TargetCluster %s/%s: the kubeconfig in Secret %s: %w", namespace, name, sec.Name, err)
		}
		return cfg, nil
	}, obj)
	return tg, err
}

func (t *targets) cached(_ context.Context, key, version string, load func() (*rest.Config, error), obj *ctrlv1.TargetCluster) (*target, error) {
	t.mu.Lock()
	c, ok := t.cache[key]
	t.mu.Unlock()
	if !ok || c.secretVersion != version {
		cfg, err := load()
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = 200, 400
		cfg.Timeout = 30 * time.Second
		kc, err := kube.New(cfg, kube.Options{})
		if err != nil {
			return nil, err
		}
		c = cachedTarget{secretVersion: version, config: cfg, client: kc, heads: state.NewHeads()}
		t.mu.Lock()
		t.cache[key] = c
		t.mu.Unlock()
	}
	return &target{key: key, config: rest.CopyConfig(c.config), client: c.client, heads: c.heads, object: obj}, nil
}

// targetReconciler keeps each TargetCluster's status: Ready when its API server
// answers, and the Kubernetes version it reports.
type targetReconciler struct {
	c      *Controller
	client client.Client
}

func (r *targetReconciler) setup(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("targetcluster").
		For(&ctrlv1.TargetCluster{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.forSecret)).
		WatchesRawSource(r.c.shardGained(func() client.ObjectList { return &ctrlv1.TargetClusterList{} }, r.client)).
		WithOptions(controller.Options{SkipNameValidation: ptr(true)}).
		Complete(r)
}

// forSecret enqueues the TargetClusters whose kubeconfig is the Secret.
func (r *targetReconciler) forSecret(ctx context.Context, o client.Object) []reconcile.Request {
	return listRequests(ctx, r.client, &ctrlv1.TargetClusterList{}, client.InNamespace(o.GetNamespace()), client.MatchingFields{refsIndex: ref("Secret", o.GetName())})
}

func (r *targetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	if !r.c.owns(targetKey(req.Namespace, req.Name)) {
		return reconcile.Result{}, nil // another replica's shard
	}
	obj := &ctrlv1.TargetCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := newStatusPatcher(r.client, obj)
	defer func() { retErr = status.finish(ctx, obj, retErr) }()
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	tg, err := r.c.targets.get(ctx, req.Namespace, req.Name)
	var version string
	if err == nil {
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		version, err = tg.client.ServerVersion(vctx)
		cancel()
	}
	if err != nil {
		reason, msg := unreachable(err)
		meta.SetStatusCondition(&st.Conditions, newCondition("Ready", metav1.ConditionFalse, obj.Generation, reason, msg))
	} else {
		st.KubernetesVersion = strings.TrimPrefix(version, "v")
		meta.SetStatusCondition(&st.Conditions, newCondition("Ready", metav1.ConditionTrue, obj.Generation, ReasonReachable, "the API server answers, Kubernetes "+st.KubernetesVersion))
	}
	return reconcile.Result{RequeueAfter: r.c.opts.TargetResync}, nil
}

// unreachable says why a cluster's API server could not be used: a reason of
// its TargetCluster's Ready condition and a message.
func unreachable(err error) (reason, msg string) {
	if apierrors.IsUnauthorized(err) {
		return ReasonUnauthorized, "Unauthorized: the API server refuses the kubeconfig's credentials (revoked or expired?); put a new kubeconfig in the Secret: " + err.Error()
	}
	return ReasonUnreachable, "cannot reach the cluster: " + err.Error()
}

// now is the time an installation's lastAppliedTime is stamped with.
func now() string { return metav1.Now().UTC().Format(time.RFC3339) }

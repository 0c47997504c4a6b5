package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
)

// catalogReconciler says in each PluginCatalog's status whether its sources can
// be read and which plugin versions they offer. Installations read catalogs
// themselves; this is for people and for `kubectl get pluginCatalogs`.
type catalogReconciler struct {
	c      *Controller
	client client.Client
}

func (r *catalogReconciler) setup(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("plugincatalog").
		For(&ctrlv1.PluginCatalog{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.holders)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.holders)).
		WatchesRawSource(r.c.shardGained(func() client.ObjectList { return &ctrlv1.PluginCatalogList{} }, r.client)).
		WithOptions(controller.Options{SkipNameValidation: ptr(true)}).
		Complete(r)
}

func (r *catalogReconciler) holders(ctx context.Context, o client.Object) []reconcile.Request {
	return listRequests(ctx, r.client, &ctrlv1.PluginCatalogList{}, client.InNamespace(o.GetNamespace()), client.MatchingFields{refsIndex: ref(kindOf(o), o.GetName())})
}

// catalogResync is how often a catalog with remote sources is listed again.
const catalogResync = 10 * time.Minute

func (r *catalogReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	if !r.c.owns(req.String()) {
		return reconcile.Result{}, nil // another replica's shard
	}
	obj := &ctrlv1.PluginCatalog{}
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := newStatusPatcher(r.client, obj)
	defer func() { retErr = status.finish(ctx, obj, retErr) }()
	st := &obj.Status
	gen := obj.Generation
	observed := st.ObservedGeneration
	st.ObservedGeneration = gen
	srcs, unpack, err := r.c.catalogSources(ctx, r.client, req.Namespace, req.Name)
	from, local := r.c.listedFrom(srcs)
	if err == nil && local && meta.IsStatusConditionTrue(st.Conditions, "Ready") && observed == gen && st.ListedFrom == from {
		return reconcile.Result{RequeueAfter: catalogResync}, nil // listed from the same packages already
	}
	var versions []string
	if err == nil {
		err = unpack.do()
	}
	if err == nil {
		versions, err = r.list(ctx, req.Namespace, req.Name, srcs)
	}
	var se *specError
	switch {
	case errors.As(err, &se):
		meta.SetStatusCondition(&st.Conditions, newCondition("Ready", metav1.ConditionFalse, gen, ReasonInvalidSpec, se.msg))
	case err != nil:
		meta.SetStatusCondition(&st.Conditions, newCondition("Ready", metav1.ConditionFalse, gen, "Unavailable", err.Error()))
	default:
		st.Plugins, st.ListedFrom = versions, from
		meta.SetStatusCondition(&st.Conditions, newCondition("Ready", metav1.ConditionTrue, gen, "Listed", fmt.Sprintf("%d plugin version(s)", len(versions))))
	}
	if err != nil && se == nil {
		return reconcile.Result{}, err // a catalog that is down: retried with backoff
	}
	return reconcile.Result{RequeueAfter: catalogResync}, nil
}

// listedFrom identifies a catalog's sources (their paths under the work
// directory name the resourceVersions of what holds them), whatever the work
// directory; local is false when one is a URL, which may change at any time.
func (c *Controller) listedFrom(srcs []v1alpha1.Source) (from string, local bool) {
	local = true
	h := sha256.New()
	for _, s := range srcs {
		local = local && s.Catalog == ""
		raw, _ := json.Marshal(s)
		h.Write(bytes.ReplaceAll(raw, []byte(c.opts.WorkDir), []byte("$WORKDIR")))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), local
}

// list lists a catalog's plugin versions through the same sources an
// installation uses.
func (r *catalogReconciler) list(ctx context.Context, ns, name string, srcs []v1alpha1.Source) ([]string, error) {
	doc := map[string]any{
		"apiVersion": "kubeplug.dev/v1alpha1", "kind": "Cluster", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"kubernetesVersion": "1.37.1", "plugins": map[string]any{"sources": srcs}},
	}
	raw, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	cl, l := config.Parse("PluginCatalog "+ns+"/"+name, raw)
	if l.HasFatal() {
		return nil, &specError{msg: l.String()}
	}
	var out []string
	for _, s := range cl.Sources() {
		vs, l := s.List(ctx)
		if l.HasFatal() {
			return nil, errors.New(l.String())
		}
		for _, v := range vs {
			out = append(out, v.Name+"@"+v.Version.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// ClusterFinalizer makes deleting a ManagedCluster run down on its cluster
// first (unless its deletionPolicy is Retain).
const ClusterFinalizer = "kubeplug.dev/down"

// The reasons of a ManagedCluster's conditions.
const (
	ReasonProvisioning       = "Provisioning"
	ReasonProvisioned        = "Provisioned"
	ReasonUpFailed           = "UpFailed"
	ReasonDownFailed         = "DownFailed"
	ReasonInvalidClusterFile = "InvalidClusterFile"
	ReasonProviderNotAllowed = "ProviderNotAllowed"
	ReasonTargetTaken        = "TargetClusterTaken"
	// ReasonVersionNotSupported: the provider cannot run the file's
	// spec.kubernetesVersion (Stalled).
	ReasonVersionNotSupported = "KubernetesVersionNotSupported"
)

// DefaultClusterProviders are the providers a ManagedCluster may use unless
// Options.ClusterProviders says otherwise: the ones that run from inside a
// cluster. The local provider would run the cluster in the controller's own
// container; aws deploys cloud resources with the controller's credentials —
// both only when enabled explicitly.
var DefaultClusterProviders = []string{hostsProvider}

// hostsProvider is the hosts provider's name (spec.provider.hosts), whose
// inputs a ManagedCluster gives (hostsInputs). The controller reaches it, as
// every provider, through the registry only: the program links the providers
// it serves at its edge (cmd/kubeplug-controller).
const hostsProvider = "hosts"

// ClusterRunner brings a ManagedCluster's cluster file up and down. The
// controller's is action.Up and action.Down, what `kubeplug up` and `kubeplug
// down` run; tests give a fake.
type ClusterRunner interface {
	// Up brings cl up and returns its cluster-admin kubeconfig. An error
	// wrapping provider.ErrUnsupportedVersion says the provider cannot run
	// spec.kubernetesVersion (nothing was touched): the ManagedCluster is
	// Stalled until its file changes.
	Up(ctx context.Context, cl *config.Cluster, run ClusterRun) (kubeconfig []byte, err error)
	// Down stops cl and removes what up made.
	Down(ctx context.Context, cl *config.Cluster, run ClusterRun) error
}

// ClusterRun is how one ManagedCluster's cluster is run.
type ClusterRun struct {
	// StateDir keeps the cluster's state (its PKI, the accepted host keys).
	StateDir string
	// Options are the provider's options (the hosts provider's AcceptNewHostKeys).
	Options []provider.Option
	// Events receives the provider's progress.
	Events func(provider.Event)
	// Expansions are merged into up as `kubeplug up --expansion-dir` merges
	// them (the ManagedCluster's spec.expansions, pulled and verified).
	Expansions action.ExpansionUse
}

// actionRunner runs up and down with the actions of the CLI.
type actionRunner struct{ cfg *action.Config }

func (a actionRunner) Up(ctx context.Context, cl *config.Cluster, run ClusterRun) ([]byte, error) {
	cfg := *a.cfg
	cfg.Expansions = run.Expansions
	u := action.NewUp(&cfg)
	u.StateDir, u.ProviderOptions, u.ProviderEvents = run.StateDir, run.Options, run.Events
	res, l := u.Run(ctx, cl)
	if l.HasFatal() {
		msg := l.Fatal().String()
		if strings.Contains(msg, provider.ErrUnsupportedVersion.Error()) {
			// The provider's refusal of spec.kubernetesVersion, at its line.
			return nil, &versionRefusedError{msg}
		}
		return nil, errors.New(msg)
	}
	if res == nil {
		return nil, errors.New("another run holds the cluster's lock; retrying")
	}
	if res.Kubeconfig == "" {
		return nil, fmt.Errorf("the %s provider brought the cluster up but gave no kubeconfig: the controller cannot reach it", providerOf(cl))
	}
	return os.ReadFile(res.Kubeconfig)
}

func (a actionRunner) Down(ctx context.Context, cl *config.Cluster, run ClusterRun) error {
	cfg := *a.cfg
	d := action.NewDown(&cfg)
	// The cluster is thrown away: its plugins are not uninstalled one by one
	// (a cluster that never came up could not answer), and its state goes.
	d.StateDir, d.KeepPlugins, d.Purge, d.ProviderEvents = run.StateDir, true, true, run.Events
	if _, l := d.Run(ctx, cl); l.HasFatal() {
		return errors.New(l.Fatal().String())
	}
	return nil
}

func providerOf(cl *config.Cluster) string {
	name, err := provider.NameOf(cl.Spec.Spec.Provider)
	if err != nil {
		return "local"
	}
	return name
}

// clusterReconciler brings each ManagedCluster up and publishes its
// kubeconfig as a Secret and a TargetCluster of its name; deleting one runs
// down.
type clusterReconciler struct {
	c      *Controller
	client client.Client
	runner ClusterRunner
}

func (r *clusterReconciler) setup(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("managedcluster").
		// Its own status writes do not reconcile it again: an up that failed
		// is retried after ClusterRetry, not at once.
		For(&ctrlv1.ManagedCluster{}, builder.WithPredicates(specOrDeletion)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.forRef("ConfigMap"))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.forRef("Secret"))).
		WatchesRawSource(r.c.shardGained(func() client.ObjectList { return &ctrlv1.ManagedClusterList{} }, r.client)).
		// An up takes minutes: a few at once, each cluster by one worker.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptr(true)}).
		Complete(r)
}

// specOrDeletion passes the updates of a ManagedCluster that change its spec
// or delete it.
var specOrDeletion = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
		e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// forRef enqueues the ManagedClusters that name the ConfigMap or Secret.
func (r *clusterReconciler) forRef(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return listRequests(ctx, r.client, &ctrlv1.ManagedClusterList{}, client.InNamespace(o.GetNamespace()), client.MatchingFields{refsIndex: ref(kind, o.GetName())})
	}
}

// managedClusterRefs indexes a ManagedCluster by its cluster file's ConfigMap
// and its key's Secret.
func managedClusterRefs(o client.Object) []string {
	mc := o.(*ctrlv1.ManagedCluster)
	var out []string
	if f := mc.Spec.ClusterFileFrom; f != nil {
		out = append(out, ref("ConfigMap", f.Name))
	}
	if s := mc.Spec.SSHKeySecret; s != nil {
		out = append(out, ref("Secret", s.Name))
	}
	return append(out, expansionRefs(mc.Spec.Expansions, mc.Spec.ExpansionSite)...)
}

// kubeconfigSecretName is the Secret a ManagedCluster's kubeconfig is
// published in.
func kubeconfigSecretName(name string) string { return name + "-kubeconfig" }

func (r *clusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	if !r.c.owns(targetKey(req.Namespace, req.Name)) {
		return reconcile.Result{}, nil // another replica's shard
	}
	obj := &ctrlv1.ManagedCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(obj, ClusterFinalizer) {
		controllerutil.AddFinalizer(obj, ClusterFinalizer)
		if err := r.client.Update(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	status := newStatusPatcher(r.client, obj)
	defer func() { retErr = status.finish(ctx, obj, retErr) }()
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	if !obj.DeletionTimestamp.IsZero() {
		return r.remove(ctx, obj)
	}
	in, err := r.upInputs(ctx, obj)
	if err != nil {
		return r.refused(obj, err)
	}
	if in.digest == st.AppliedDigest && meta.IsStatusConditionTrue(st.Conditions, "Ready") {
		return reconcile.Result{}, nil // up to date: an up is not repeated for nothing
	}
	if err := r.pullExpansions(ctx, obj, in); err != nil {
		return r.expansionRefused(obj, err), nil
	}
	r.clusterCondition(obj, "Provisioning", ReasonProvisioning, "running up on the "+providerOf(in.cluster)+" provider")
	machines := newMachineTracker(in.cluster, st.Machines, false)
	st.Machines, _ = machines.list()
	if err := status.patch(ctx, obj); err != nil {
		return reconcile.Result{}, err
	}
	stopProgress := r.progress(ctx, obj, status, machines)
	kubeconfig, err := r.runner.Up(ctx, in.cluster, in.run(r.c.opts.Logger.With("managedcluster", req.String()), machines))
	stopProgress()
	if err != nil {
		machines.stopped(err)
	} else {
		machines.finished(in.cluster)
	}
	st.Machines, _ = machines.list()
	// Kept even after a failed up: it may have made the PKI the hosts have.
	if serr := r.saveState(ctx, obj, in.stateDir); serr != nil {
		err = errors.Join(err, fmt.Errorf("keep the cluster's state: %w", serr))
	}
	if err == nil {
		err = r.publish(ctx, obj, kubeconfig, in.cluster.KubernetesVersion.String())
	}
	if err != nil {
		return r.upFailed(obj, err), nil
	}
	st.AppliedDigest = in.digest
	st.KubernetesVersion = in.cluster.KubernetesVersion.String()
	st.KubeconfigSecret = kubeconfigSecretName(obj.Name)
	r.clusterCondition(obj, "Ready", ReasonProvisioned, fmt.Sprintf("the cluster is up (Kubernetes %s); its kubeconfig is in Secret %s and TargetCluster %s targets it",
		st.KubernetesVersion, st.KubeconfigSecret, obj.Name)+upExpansions(obj, in))
	return reconcile.Result{}, nil
}

// upFailed records an up that failed: Failed, retried after ClusterRetry;
// Stalled too, and not retried, when the provider refused the file's
// Kubernetes version (nothing was touched, and retrying cannot help until
// the file names another: a spec, ConfigMap or key change reconciles it
// again).
func (r *clusterReconciler) upFailed(obj *ctrlv1.ManagedCluster, err error) reconcile.Result {
	st := &obj.Status
	if errors.Is(err, provider.ErrUnsupportedVersion) {
		r.clusterCondition(obj, "Failed", ReasonVersionNotSupported, err.Error()+" (the cluster stays at Kubernetes "+cmp.Or(st.KubernetesVersion, "none")+"; not retried until the cluster file changes)")
		meta.SetStatusCondition(&st.Conditions, newCondition("Stalled", metav1.ConditionTrue, obj.Generation, ReasonVersionNotSupported, err.Error()))
		return reconcile.Result{}
	}
	reason := ReasonUpFailed
	var taken *targetTakenError
	if errors.As(err, &taken) {
		reason = ReasonTargetTaken
	}
	r.clusterCondition(obj, "Failed", reason, err.Error())
	return reconcile.Result{RequeueAfter: r.c.opts.ClusterRetry}
}

// clusterCondition sets the one of Provisioning, Ready and Failed that is
// True (with Ready False and its reason and message unless it is Ready).
func (r *clusterReconciler) clusterCondition(obj *ctrlv1.ManagedCluster, which, reason, msg string) {
	gen := obj.Generation
	// Stalled is set by the one case that stalls, after this.
	meta.RemoveStatusCondition(&obj.Status.Conditions, "Stalled")
	for _, typ := range []string{"Provisioning", "Failed"} {
		s := metav1.ConditionFalse
		if typ == which {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&obj.Status.Conditions, newCondition(typ, s, gen, reason, msg))
	}
	readyStatus := metav1.ConditionFalse
	if which == "Ready" {
		readyStatus = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&obj.Status.Conditions, newCondition("Ready", readyStatus, gen, reason, msg))
}

// refused records a ManagedCluster whose inputs cannot be used until edited.
func (r *clusterReconciler) refused(obj *ctrlv1.ManagedCluster, err error) (reconcile.Result, error) {
	reason := ReasonInvalidClusterFile
	var na *notAllowedError
	if errors.As(err, &na) {
		reason = ReasonProviderNotAllowed
	}
	r.clusterCondition(obj, "Failed", reason, err.Error())
	// A changed ConfigMap or Secret reconciles it again (forRef); a missing
	// one is looked for again now and then.
	return reconcile.Result{RequeueAfter: 5 * r.c.opts.ClusterRetry}, nil
}

type notAllowedError struct{ msg string }

func (e *notAllowedError) Error() string { return e.msg }

// versionRefusedError is action.Up's refusal of spec.kubernetesVersion by the
// provider.
type versionRefusedError struct{ msg string }

func (e *versionRefusedError) Error() string { return e.msg }
func (e *versionRefusedError) Unwrap() error { return provider.ErrUnsupportedVersion }

type targetTakenError struct{ msg string }

func (e *targetTakenError) Error() string { return e.msg }

// clusterInputs is what one up of a ManagedCluster runs on.
type clusterInputs struct {
	cluster  *config.Cluster
	stateDir string
	options  []provider.Option
	// digest identifies the cluster file, the key and the options.
	digest string
	// expansions are spec.expansions' (nil when inputs were read for down).
	expansions *clusterExpansions
}

func (in *clusterInputs) run(log interface {
	Info(msg string, args ...any)
}, machines *machineTracker) ClusterRun {
	return ClusterRun{StateDir: in.stateDir, Options: in.options, Expansions: in.expansionsUse(), Events: func(e provider.Event) {
		log.Info("provider", "step", e.Step, "node", e.Node, "message", e.Message)
		machines.event(e)
	}}
}

// ProgressInterval is how often a ManagedCluster's status shows its
// machines' phases while up or down runs (when they changed).
const ProgressInterval = 2 * time.Second

// progress writes the machines' phases to obj's status every
// ProgressInterval while a run goes on; the function it returns stops it and
// returns once it wrote its last. obj is the progress's alone until then.
func (r *clusterReconciler) progress(ctx context.Context, obj *ctrlv1.ManagedCluster, status *statusPatcher, machines *machineTracker) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if ms, changed := machines.list(); changed {
				obj.Status.Machines = ms
				if err := status.patch(ctx, obj); err != nil {
					r.c.opts.Logger.Info("status progress", "managedcluster", obj.Namespace+"/"+obj.Name, "error", err.Error())
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// inputs reads a ManagedCluster's cluster file and key and checks that its
// provider is allowed. Its errors name the resource, file line or field.
func (r *clusterReconciler) inputs(ctx context.Context, obj *ctrlv1.ManagedCluster) (*clusterInputs, error) {
	name, text, err := r.clusterFile(ctx, obj)
	if err != nil {
		return nil, err
	}
	cl, l := config.Parse(name, text)
	if cl == nil {
		return nil, errors.New(l.Fatal().String())
	}
	prov := providerOf(cl)
	if !slices.Contains(r.c.opts.ClusterProviders, prov) {
		return nil, &notAllowedError{fmt.Sprintf("%s: spec.provider: the %s provider may not be used by a ManagedCluster here (allowed: %s; start the controller with --cluster-providers to allow others)",
			name, prov, strings.Join(r.c.opts.ClusterProviders, ", "))}
	}
	in := &clusterInputs{cluster: cl, stateDir: filepath.Join(r.c.opts.WorkDir, "clusters", obj.Namespace, obj.Name)}
	for _, o := range r.c.opts.ClusterProviderOptions {
		if o.Provider() == prov {
			in.options = append(in.options, o)
		}
	}
	if err := r.restoreState(ctx, obj, in.stateDir); err != nil {
		return nil, err
	}
	// Relative paths of the file (plugin directories) are the state
	// directory's: the controller has no directory of the user's.
	cl.Dir = in.stateDir
	h := sha256.New()
	h.Write(text)
	fmt.Fprintf(h, "\x00accept=%v", obj.Spec.AcceptNewHostKeys)
	if prov == hostsProvider {
		keyVersion, err := r.hostsInputs(ctx, obj, name, in)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "\x00key=%s", keyVersion)
	}
	in.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return in, nil
}

// clusterFile returns a ManagedCluster's cluster file and the name its
// diagnostics give it.
func (r *clusterReconciler) clusterFile(ctx context.Context, obj *ctrlv1.ManagedCluster) (string, []byte, error) {
	spec := &obj.Spec
	switch {
	case spec.ClusterFile != "" && spec.ClusterFileFrom != nil:
		return "", nil, fmt.Errorf("ManagedCluster %s/%s: set one of spec.clusterFile and spec.clusterFileFrom, not both", obj.Namespace, obj.Name)
	case spec.ClusterFile != "":
		return fmt.Sprintf("ManagedCluster %s/%s spec.clusterFile", obj.Namespace, obj.Name), []byte(spec.ClusterFile), nil
	case spec.ClusterFileFrom != nil:
		ref := spec.ClusterFileFrom
		cm := &corev1.ConfigMap{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, cm); err != nil {
			return "", nil, fmt.Errorf("ManagedCluster %s/%s: spec.clusterFileFrom: ConfigMap %s: %w", obj.Namespace, obj.Name, ref.Name, err)
		}
		text, ok := cm.Data[ref.Key]
		if !ok {
			return "", nil, fmt.Errorf("ManagedCluster %s/%s: spec.clusterFileFrom: ConfigMap %s has no key %q", obj.Namespace, obj.Name, ref.Name, ref.Key)
		}
		return fmt.Sprintf("ConfigMap %s/%s key %s", obj.Namespace, ref.Name, ref.Key), []byte(text), nil
	}
	return "", nil, fmt.Errorf("ManagedCluster %s/%s: set spec.clusterFile or spec.clusterFileFrom", obj.Namespace, obj.Name)
}

// hostsInputs gives the hosts provider its key, from spec.sshKeySecret, and
// the known_hosts file of the cluster's state; it returns the key Secret's
// version. The cluster file may name no key file and no agent: they would be
// the controller's.
func (r *clusterReconciler) hostsInputs(ctx context.Context, obj *ctrlv1.ManagedCluster, file string, in *clusterInputs) (string, error) {
	hp := in.cluster.Spec.Spec.Provider.Hosts
	var bad []string
	check := func(path string, s *v1alpha1.HostSSH) {
		if s != nil && (s.KeyFile != "" || s.Agent) {
			bad = append(bad, path)
		}
	}
	check("spec.provider.hosts.ssh", hp.SSH)
	for i, p := range hp.Pools {
		for j, h := range p.Hosts {
			check(fmt.Sprintf("spec.provider.hosts.pools[%d].hosts[%d].ssh", i, j), h.SSH)
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("%s: %s: keyFile and agent name the controller's files and agent; give the key in the ManagedCluster's spec.sshKeySecret instead", file, strings.Join(bad, ", "))
	}
	if hp.KnownHostsFile != "" {
		return "", fmt.Errorf("%s: spec.provider.hosts.knownHostsFile: a file of the controller's; the ManagedCluster keeps the host keys with the cluster's state (set spec.acceptNewHostKeys to trust them on first use)", file)
	}
	ref := obj.Spec.SSHKeySecret
	if ref == nil {
		return "", fmt.Errorf("ManagedCluster %s/%s: spec.sshKeySecret: the hosts provider needs the private key to log in with, in a Secret", obj.Namespace, obj.Name)
	}
	key := cmp.Or(ref.Key, corev1.SSHAuthPrivateKey)
	sec := &corev1.Secret{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, sec); err != nil {
		return "", fmt.Errorf("ManagedCluster %s/%s: spec.sshKeySecret: Secret %s: %w", obj.Namespace, obj.Name, ref.Name, err)
	}
	pem, ok := sec.Data[key]
	if !ok {
		return "", fmt.Errorf("ManagedCluster %s/%s: spec.sshKeySecret: Secret %s has no key %q", obj.Namespace, obj.Name, ref.Name, key)
	}
	keyFile := filepath.Join(in.stateDir, "ssh-key")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		return "", err
	}
	if hp.SSH == nil {
		hp.SSH = &v1alpha1.HostSSH{}
	}
	hp.SSH.KeyFile = keyFile
	hp.KnownHostsFile = filepath.Join(in.stateDir, "known_hosts")
	if obj.Spec.AcceptNewHostKeys {
		opts, err := provider.FlagOptions("--accept-new-host-keys")
		if err != nil {
			return "", fmt.Errorf("ManagedCluster %s/%s: spec.acceptNewHostKeys: %w", obj.Namespace, obj.Name, err)
		}
		in.options = append(in.options, opts...)
	}
	return sec.ResourceVersion + "/" + key, nil
}

// ClusterVersionAnnotation is, on a ManagedCluster's TargetCluster, the
// Kubernetes version its last up brought up: an up that changes it changes
// the TargetCluster, which then reads the cluster's version at once (not at
// its next resync), and its installations re-resolve for it.
const ClusterVersionAnnotation = "kubeplug.dev/kubernetes-version"

// publish writes the cluster's kubeconfig to its Secret and makes the
// TargetCluster of the ManagedCluster's name point at it, both owned by the
// ManagedCluster. A TargetCluster of that name that is not its own is left
// alone: the error says so.
func (r *clusterReconciler) publish(ctx context.Context, obj *ctrlv1.ManagedCluster, kubeconfig []byte, version string) error {
	owner := ownerRef(obj)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: kubeconfigSecretName(obj.Name)}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.client, sec, func() error {
		if !ownedBy(sec, obj) && !sec.CreationTimestamp.IsZero() {
			return &targetTakenError{fmt.Sprintf("Secret %s/%s exists and is not ManagedCluster %s's: delete or rename it", obj.Namespace, sec.Name, obj.Name)}
		}
		sec.OwnerReferences = []metav1.OwnerReference{owner}
		sec.Data = map[string][]byte{"kubeconfig": kubeconfig}
		return nil
	}); err != nil {
		return err
	}
	tc := &ctrlv1.TargetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}
	_, err := controllerutil.CreateOrPatch(ctx, r.client, tc, func() error {
		if !ownedBy(tc, obj) && !tc.CreationTimestamp.IsZero() {
			return &targetTakenError{fmt.Sprintf("TargetCluster %s/%s exists and is not ManagedCluster %s's: delete it, or name the ManagedCluster otherwise", obj.Namespace, obj.Name, obj.Name)}
		}
		tc.OwnerReferences = []metav1.OwnerReference{owner}
		metav1.SetMetaDataAnnotation(&tc.ObjectMeta, ClusterVersionAnnotation, version)
		tc.Spec.KubeconfigSecret = ctrlv1.KeyRefOptionalKey{Name: sec.Name}
		return nil
	})
	return err
}

// neverUp says whether no up has run on a ManagedCluster: its inputs were
// refused (an invalid cluster file, a provider not allowed) and nothing was
// ever brought up.
func neverUp(obj *ctrlv1.ManagedCluster) bool {
	c := meta.FindStatusCondition(obj.Status.Conditions, "Failed")
	return obj.Status.AppliedDigest == "" && c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == ReasonInvalidClusterFile || c.Reason == ReasonProviderNotAllowed)
}

func ownerRef(obj *ctrlv1.ManagedCluster) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: ctrlv1.GroupVersion.String(), Kind: "ManagedCluster", Name: obj.Name, UID: obj.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

func ownedBy(o client.Object, mc *ctrlv1.ManagedCluster) bool {
	return slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == mc.UID })
}

// remove runs down on a ManagedCluster being deleted (unless its
// deletionPolicy is Retain), deletes its Secret and TargetCluster, and lets it
// go. A down that fails keeps it, Failed naming the host and step, and is
// retried.
func (r *clusterReconciler) remove(ctx context.Context, obj *ctrlv1.ManagedCluster) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, ClusterFinalizer) {
		return reconcile.Result{}, nil
	}
	stateDir := filepath.Join(r.c.opts.WorkDir, "clusters", obj.Namespace, obj.Name)
	if obj.Spec.DeletionPolicy != "Retain" {
		in, err := r.inputs(ctx, obj)
		if err != nil && neverUp(obj) {
			// Refused before any up ran: there is nothing to bring down.
			err, in = nil, nil
		}
		if in != nil {
			r.clusterCondition(obj, "Provisioning", ReasonProvisioning, "running down on the "+providerOf(in.cluster)+" provider")
			machines := newMachineTracker(in.cluster, obj.Status.Machines, true)
			err = r.runner.Down(ctx, in.cluster, in.run(r.c.opts.Logger.With("managedcluster", obj.Namespace+"/"+obj.Name), machines))
			if err != nil {
				machines.stopped(err)
			}
			obj.Status.Machines, _ = machines.list()
		}
		if err != nil {
			r.clusterCondition(obj, "Failed", ReasonDownFailed, "down: "+err.Error()+" (retrying; set spec.deletionPolicy: Retain to let the resource go and leave the cluster)")
			return reconcile.Result{RequeueAfter: r.c.opts.ClusterRetry}, nil
		}
	}
	for _, o := range []client.Object{
		&ctrlv1.TargetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: kubeconfigSecretName(obj.Name)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: stateSecretName(obj.Name)}},
	} {
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil && ownedBy(o, obj) {
			if err := r.client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
			}
		}
	}
	_ = os.RemoveAll(stateDir)
	controllerutil.RemoveFinalizer(obj, ClusterFinalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, errGone
}

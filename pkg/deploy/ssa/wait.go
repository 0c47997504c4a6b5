package ssa

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// pollInterval is how often objects that are not ready yet are looked at again.
const pollInterval = 250 * time.Millisecond

// The waits for readiness (WaitReady, WaitEstablished) look again
// pollFirst after their first look, the interval doubling up to pollInterval:
// a Deployment on a cluster that runs its Pods at once (simulated nodes) or a
// CustomResourceDefinition is ready within a few tens of milliseconds to a
// few hundred, which a fixed pollInterval would see up to 250 ms late at each
// wave; one that takes seconds costs a look every pollInterval as before.
const pollFirst = 20 * time.Millisecond

// backoff is the interval after interval in a wait's sequence: doubled, at
// most pollInterval.
func backoff(interval time.Duration) time.Duration { return min(2*interval, pollInterval) }

// WaitEstablished waits until every object among objs whose rule says so (the
// CustomResourceDefinitions) is Established and its names accepted, so that its
// custom resources can be applied.
func (a *Applier) WaitEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if RuleFor(o.GroupVersionKind().GroupKind()).Established {
			crds = append(crds, o)
		}
	}
	if len(crds) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	for _, c := range crds {
		ri, err := a.c.Resource(c)
		if err != nil {
			return err
		}
		for interval := pollFirst; ; interval = backoff(interval) {
			got, err := ri.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err == nil && conditionTrue(got, "Established") && conditionTrue(got, "NamesAccepted") {
				break
			}
			select {
			case <-ctx.Done():
				why := "not Established"
				if got != nil {
					why = conditionsText(got)
				}
				return fmt.Errorf("CustomResourceDefinition %s did not become Established within %s: %s", c.GetName(), a.opts.Timeout, why)
			case <-time.After(interval):
			}
		}
	}
	return nil
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// conditionsText summarises an object's conditions: "Available=False (MinimumReplicasUnavailable: ...)".
func conditionsText(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		p := fmt.Sprintf("%v=%v", m["type"], m["status"])
		if r, _ := m["reason"].(string); r != "" {
			msg, _ := m["message"].(string)
			p += " (" + r
			if msg != "" {
				p += ": " + msg
			}
			p += ")"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "no conditions"
	}
	return strings.Join(parts, ", ")
}

// WaitProgress is told how a WaitReady goes, from one goroutine at a time; a
// nil field is not told.
type WaitProgress struct {
	// Ready is called as each object becomes ready: ready of total are.
	Ready func(obj kube.ObjRef, ready, total int)
	// Waiting is called when what the wait waits on changes: the first object
	// (in apply order) not ready yet, and why not; ready of total are (those
	// ready from the start counted too, which Ready is not told of).
	Waiting func(obj kube.ObjRef, why string, ready, total int)
}

// WaitReady waits until every object is Current by kstatus and passes the health
// checks for its kind, telling progress as each becomes ready and what it waits
// on. The first live objects are what the server returned from the
// apply: those already ready (ConfigMaps, RBAC, Services...) need no further
// request. The rest (a Helm release's manifest, which says nothing of the live
// object) and every object not ready yet are polled.
func (a *Applier) WaitReady(ctx context.Context, objs []*unstructured.Unstructured, live int, checks Health, progress WaitProgress) error {
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	var waitingOn string // the last thing progress.Waiting was told
	pending := map[int]*pendingObj{}
	for i, o := range objs {
		if i >= live {
			pending[i] = &pendingObj{}
		} else if p := checkReady(ctx, o, checks); p != nil {
			pending[i] = p
		}
	}
	done := len(objs) - len(pending)
	for interval := pollFirst; len(pending) > 0; interval = backoff(interval) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, a.opts.Concurrency)
		keys := make([]int, 0, len(pending))
		for i := range pending {
			keys = append(keys, i)
		}
		for _, i := range keys {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				o := objs[i]
				ri, err := a.c.Resource(o)
				if err != nil {
					return
				}
				got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil {
					// A read the wait's own end cut short says nothing of the
					// object: its deadline may have passed a moment before ctx
					// says so (the client's rate limiter refuses such a read).
					if deadline, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Now().Before(deadline)) {
						mu.Lock()
						pending[i] = &pendingObj{err: err}
						mu.Unlock()
					}
					return
				}
				p := checkReady(ctx, got, checks)
				mu.Lock()
				defer mu.Unlock()
				if p == nil {
					delete(pending, i)
					done++
					if progress.Ready != nil {
						progress.Ready(kube.RefOf(o), done, len(objs))
					}
					return
				}
				objs[i] = got
				pending[i] = p
			})
		}
		wg.Wait()
		if len(pending) == 0 {
			break
		}
		if progress.Waiting != nil {
			first := slices.Min(slices.Collect(maps.Keys(pending)))
			ref, why := kube.RefOf(objs[first]), pending[first].reason()
			if now := ref.String() + "\x00" + why; now != waitingOn {
				waitingOn = now
				progress.Waiting(ref, why, done, len(objs))
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				// The caller gave up (Ctrl-C), not the timeout: say so, and
				// keep context.Canceled in the chain for the record.
				return fmt.Errorf("%w while waiting for %d object(s) to become ready", context.Canceled, len(pending))
			}
			return notReady(objs, pending, a.opts.Timeout, a.podReasons)
		case <-time.After(interval):
		}
	}
	return nil
}

// pendingObj says why an object is not ready: its kstatus, or a health expression.
type pendingObj struct {
	status *status.Result
	// expr and why are set when kstatus says Current but a health expression fails.
	expr, why string
	// err is why the object could not be read.
	err error
	// cond is set when kstatus says Current but a condition the kind needs
	// (servingCondition) is not True.
	cond string
}

// reason says in a few words why an object is not ready, for a progress line
// (notReady says it in full, conditions and all).
func (p *pendingObj) reason() string {
	switch {
	case p.err != nil:
		return "could not be read: " + p.err.Error()
	case p.cond != "":
		return "not " + p.cond
	case p.expr != "":
		return "health `" + p.expr + "` " + p.why
	case p.status != nil && p.status.Message != "":
		return string(p.status.Status) + ": " + p.status.Message
	case p.status != nil:
		return string(p.status.Status)
	}
	return "not read yet"
}

// servingCondition is the condition an object must have True to be ready beyond
// kstatus, which knows nothing of it: an APIService kubeplug generated for a
// plugin's served API (contributes.kubernetes.apis) is ready once the API server
// reaches its Service (Available); "" for anything else. An APIService a plugin
// writes by hand keeps kstatus alone, as before the construct existed: its
// server may not run where it is applied (simulated nodes).
func servingCondition(o *unstructured.Unstructured) string {
	if o.GetKind() != "APIService" || o.GroupVersionKind().Group != "apiregistration.k8s.io" {
		return ""
	}
	if _, ok := o.GetAnnotations()[serving.AnnotationInjectCA]; !ok {
		return ""
	}
	if svc, ok, _ := unstructured.NestedMap(o.Object, "spec", "service"); !ok || svc == nil {
		return "" // served by the API server itself (a built-in group or CRDs)
	}
	return "Available"
}

// checkReady returns nil when o is ready, else why not.
func checkReady(ctx context.Context, o *unstructured.Unstructured, checks Health) *pendingObj {
	r, err := status.Compute(o)
	if err != nil || r.Status != status.CurrentStatus {
		return &pendingObj{status: r}
	}
	if cond := servingCondition(o); cond != "" && !conditionTrue(o, cond) {
		return &pendingObj{status: r, cond: cond}
	}
	if expr, why := checks.failing(ctx, o); expr != "" {
		return &pendingObj{status: r, expr: expr, why: why}
	}
	return nil
}

func notReady(objs []*unstructured.Unstructured, pending map[int]*pendingObj, timeout time.Duration, podReasons func(*unstructured.Unstructured) string) error {
	var lines []string
	for i, p := range pending {
		line := kube.RefOf(objs[i]).String()
		switch {
		case p.err != nil:
			line += " could not be read: " + p.err.Error()
		case p.cond != "":
			line += " is not " + p.cond + " [" + conditionsText(objs[i]) + "]"
		case p.expr != "":
			line += " is Current but its health expression `" + p.expr + "` " + p.why
		case p.status != nil:
			line += " is " + string(p.status.Status)
			if p.status.Message != "" {
				line += ": " + p.status.Message
			}
			line += " [" + conditionsText(objs[i]) + "]"
		default:
			line += " [" + conditionsText(objs[i]) + "]"
		}
		if p.err == nil {
			line += podReasons(objs[i])
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return fmt.Errorf("not ready after %s: %s", timeout, strings.Join(lines, "; "))
}

// podReasons says why the Pods of a workload (anything with a label selector and
// a Pod template: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) are not
// ready, from their containers' waiting and terminated states — an image that
// cannot be pulled, a crash loop — which the workload's own status never names.
// It asks the API server once, briefly: the wait is already over.
func (a *Applier) podReasons(o *unstructured.Unstructured) string {
	sel, found, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
	if !found || len(sel) == 0 || o.GetNamespace() == "" {
		return ""
	}
	if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "template"); !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pods, err := a.c.ResourceFor(kube.ObjRef{Version: "v1", Kind: "Pod", Namespace: o.GetNamespace()})
	if err != nil {
		return ""
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String(), Limit: 20})
	if err != nil {
		return ""
	}
	var reasons []string
	seen := map[string]bool{}
	for _, pod := range list.Items {
		for _, text := range containerReasons(pod) {
			if !seen[text] {
				seen[text] = true
				reasons = append(reasons, "pod "+pod.GetName()+" "+text)
			}
		}
		if len(reasons) >= 3 {
			break
		}
	}
	if len(reasons) == 0 {
		return ""
	}
	return " (" + strings.Join(reasons, "; ") + ")"
}

// containerReasons are the reasons, with their messages, of the waiting and
// terminated states of pod's containers, but those of a container on its way
// (creating, initializing) or done.
func containerReasons(pod unstructured.Unstructured) []string {
	var out []string
	statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
	for _, cs := range statuses {
		m, _ := cs.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "name")
		for _, state := range []string{"waiting", "terminated"} {
			reason, _, _ := unstructured.NestedString(m, "state", state, "reason")
			msg, _, _ := unstructured.NestedString(m, "state", state, "message")
			if reason == "" || reason == "ContainerCreating" || reason == "PodInitializing" || reason == "Completed" {
				continue
			}
			text := "container " + name + ": " + reason
			if msg != "" {
				text += ": " + msg
			}
			out = append(out, text)
		}
	}
	return out
}

// ReadyNow says whether a live object is ready by the same rules a wait uses
// (kstatus Current, and the condition its kind needs), and when it is not, why:
// its status message or its conditions.
func ReadyNow(o *unstructured.Unstructured) (bool, string) {
	r, err := status.Compute(o)
	switch {
	case err != nil:
		return false, err.Error()
	case r.Status != status.CurrentStatus:
		why := string(r.Status)
		if r.Message != "" {
			why += ": " + r.Message
		}
		return false, why
	}
	if cond := servingCondition(o); cond != "" && !conditionTrue(o, cond) {
		return false, "not " + cond + " [" + conditionsText(o) + "]"
	}
	return true, ""
}

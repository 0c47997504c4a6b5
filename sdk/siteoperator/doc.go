// Package siteoperator lets a site write, in a few lines, the operator that proves
// the conditions an expansion delegates (spec.delegateConditions, see
// docs/expansions.md): kubeplug does not run those plugin checks, it waits until
// the operator sets each condition to True on the SiteCondition named after the
// operator (expansion.kubeplug.dev/v1alpha1, cluster-scoped, created by the
// expansion's plugin).
//
// An operator is a set of probes, one per condition type, run every Interval
// with controller-runtime's client; each result is written to the
// SiteCondition's status as a standard metav1.Condition, with observedGeneration.
//
//	op := &siteoperator.Operator{Name: "site-storage", Client: c, Probes: map[string]siteoperator.Probe{
//		"StorageReady": func(ctx context.Context) (bool, string, error) { return storageUp(ctx), "the SAN answers", nil },
//	}}
//	err := op.Run(ctx)
package siteoperator

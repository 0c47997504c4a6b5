package action

import (
	"context"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// RevisionDiff is what changed between two recorded revisions of a plugin, from
// their release records alone: the version, the digests of the package, the
// values and the content, and which objects and Helm releases each lists. The
// records keep no values and the diff reads no object, so it holds nothing
// sensitive.
type RevisionDiff struct {
	Plugin string `json:"plugin"`
	// From and To are the two records, without their stored objects.
	From *deploy.Record `json:"from"`
	To   *deploy.Record `json:"to"`
	// Added are the objects (kube.ObjRef.String) To lists and From does not;
	// Removed those From lists and To does not; both sorted.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Kept counts the objects both list.
	Kept int `json:"kept"`
}

// Compare returns the difference between two recorded revisions of plugin.
func (a *History) Compare(ctx context.Context, plugin string, from, to int) (*RevisionDiff, diag.List) {
	var l diag.List
	d, err := connect(ctx, a.cfg, a.Target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	recs := make([]*deploy.Record, 2)
	for i, rev := range []int{from, to} {
		// RollbackTarget reads a revision without changing anything.
		r, err := d.RollbackTarget(ctx, plugin, rev)
		if err != nil {
			l.Errorf("", 0, 0, "", "%v", err)
			return nil, l
		}
		recs[i] = r
	}
	out := &RevisionDiff{Plugin: plugin, From: recs[0], To: recs[1]}
	in := map[string]bool{}
	for _, o := range recs[0].Objects {
		in[o.String()] = true
	}
	for _, o := range recs[1].Objects {
		s := o.String()
		if in[s] {
			out.Kept++
			delete(in, s)
			continue
		}
		out.Added = append(out.Added, s)
	}
	for s := range in {
		out.Removed = append(out.Removed, s)
	}
	slices.Sort(out.Added)
	slices.Sort(out.Removed)
	return out, l
}

package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/deploy/state"
)

// ErrDowngrade is returned when a plugin's new version is lower than the installed
// one and nothing allows the downgrade.
var ErrDowngrade = errors.New("downgrade refused")

// older reports whether version a is lower than b; versions that do not parse are
// not ordered.
func older(a, b string) bool {
	va, err1 := semver.NewVersion(a)
	vb, err2 := semver.NewVersion(b)
	return err1 == nil && err2 == nil && va.LessThan(vb)
}

// downgrade refuses moving from the installed record to version, unless
// Options.AllowDowngrade or the installed version declared it safe.
func (d *Deployer) downgrade(installed *Record, plugin, version string) error {
	if installed == nil || !older(version, installed.Version) || d.opts.AllowDowngrade || installed.AllowDowngrade {
		return nil
	}
	remedy := d.opts.Remedies.AllowDowngrade
	if remedy != "" {
		remedy = strings.ToUpper(remedy[:1]) + remedy[1:]
	}
	return fmt.Errorf("%w: plugin %s %s is installed (revision %d) and %s is older; nothing was changed. "+
		"%s if %s can run on what %s left in the cluster "+
		"(or %s %s's plugin.yaml declares spec.upgrade.allowDowngrade: true)",
		ErrDowngrade, plugin, installed.Version, installed.Revision, version, remedy, version, installed.Version, plugin, installed.Version)
}

// ErrOwned is matched (errors.Is) by an *OwnerError.
var ErrOwned = errors.New("managed by another owner")

// OwnerError refuses a change to a plugin that another owner manages: a
// PluginInstallation's plugin changed by the CLI or another installation, or
// the CLI's plugin by an installation that does not adopt it
// (Options.Adopt). It matches ErrOwned.
type OwnerError struct {
	Plugin string
	// Owner manages the plugin: a PluginInstallation ("namespace/name"), or
	// empty for the CLI.
	Owner string
	// Remedy says how to take the plugin over (Remedies.Adopt), when the CLI
	// manages it; empty names none.
	Remedy string
}

func (e *OwnerError) Error() string {
	if e.Owner == "" {
		msg := fmt.Sprintf("plugin %s is managed by the CLI (installed by kubeplug apply or up, not by an installation); it was left as it is", e.Plugin)
		if e.Remedy != "" {
			msg += ": " + e.Remedy + " to take it over"
		}
		return msg
	}
	return fmt.Sprintf("plugin %s is managed by PluginInstallation %s: change it there, or delete that installation first", e.Plugin, e.Owner)
}

// Is reports whether target is ErrOwned.
func (e *OwnerError) Is(target error) bool { return target == ErrOwned }

// OwnerName names an owner as status shows it: "cli" for the CLI's plugins,
// the PluginInstallation ("namespace/name") for an installation's.
func OwnerName(owner string) string {
	if owner == "" {
		return "cli"
	}
	return owner
}

// CheckDowngrade returns an ErrDowngrade error when version is lower than the
// plugin's installed version and nothing allows it, without changing anything.
func (d *Deployer) CheckDowngrade(ctx context.Context, plugin, version string) error {
	return d.CheckDowngrades(ctx, map[string]string{plugin: version})
}

// CheckDowngrades is CheckDowngrade for several plugins (name → version) at once,
// with one read of the records; the error joins one per refused plugin.
func (d *Deployer) CheckDowngrades(ctx context.Context, versions map[string]string) error {
	// The histories read here serve the run's waves too (history), so that a
	// plugin's wave does not read its records again.
	hs, ok, err := d.readAhead(ctx, slices.Sorted(maps.Keys(versions)))
	var recs []*Record
	switch {
	case err != nil:
		return err
	case ok:
		for _, h := range hs {
			recs = append(recs, h[len(h)-1])
		}
	default:
		if recs, err = d.Inventories(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for _, r := range recs {
		if v, ok := versions[r.Plugin]; ok {
			if r.Owner != d.opts.Owner && (r.Owner != "" || !d.opts.Adopt) {
				errs = append(errs, &OwnerError{Plugin: r.Plugin, Owner: r.Owner, Remedy: d.opts.Remedies.Adopt})
				continue
			}
			if err := d.downgrade(r, r.Plugin, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Owned returns the installed plugins whose newest revision has the Deployer's
// owner (Options.Owner): the ones its runs may remove. A run that read every
// plugin's records at its start (CheckDowngrades) answers from them: what the
// run installed since is in its plan, not among what it removes, and the
// operation lease kept other runs out.
func (d *Deployer) Owned(ctx context.Context) ([]*Record, error) {
	var invs []*Record
	d.histMu.Lock()
	for _, h := range d.hist {
		if len(h) > 0 {
			invs = append(invs, h[len(h)-1])
		}
	}
	read := d.hist != nil
	d.histMu.Unlock()
	if some, ok := d.store.(state.OwnedHistories); !read && ok {
		// The owner's plugins only, not every plugin's records.
		hs, err := some.HistoriesFor(ctx, d.opts.Owner, nil)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			invs = append(invs, h[len(h)-1])
		}
	} else if !read {
		var err error
		if invs, err = d.Inventories(ctx); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(invs, func(a, b *Record) int { return strings.Compare(a.Plugin, b.Plugin) })
	var out []*Record
	for _, r := range invs {
		if r.Owner == d.opts.Owner {
			out = append(out, r)
		}
	}
	return out, nil
}

// Rollback restores a recorded revision of a plugin (0: the newest Ready revision
// before the current one): it applies the objects that revision applied, prunes
// what it did not have, rolls the plugin's Helm releases back to the revisions it
// recorded, waits until everything is ready and records a new revision, "rollback
// to N". It returns that revision.
func (d *Deployer) Rollback(ctx context.Context, plugin string, revision int) (*Record, error) {
	target, err := d.RollbackTarget(ctx, plugin, revision)
	if err != nil {
		return nil, err
	}
	return d.rollbackTo(ctx, 0, target, fmt.Sprintf("rollback to %d", target.Revision))
}

// RollbackTarget is the recorded revision Rollback restores for revision (0:
// the newest Ready revision before the current one), read without changing
// anything: what a caller checks before a rollback.
func (d *Deployer) RollbackTarget(ctx context.Context, plugin string, revision int) (*Record, error) {
	cur, hist, err := state.Latest(ctx, d.store, plugin)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("plugin %s is not installed in this cluster", plugin)
	}
	var target *Record
	for _, r := range slices.Backward(hist) {
		if revision == 0 && r.Revision < cur.Revision && r.Phase == PhaseReady || revision != 0 && r.Revision == revision {
			target = r
			break
		}
	}
	if target == nil {
		have := make([]string, 0, len(hist))
		for _, r := range hist {
			have = append(have, fmt.Sprint(r.Revision))
		}
		if revision == 0 {
			return nil, fmt.Errorf("plugin %s has no Ready revision before its current one (%d) to roll back to; revisions: %s", plugin, cur.Revision, strings.Join(have, ", "))
		}
		return nil, fmt.Errorf("plugin %s has no revision %d; kubeplug keeps %d, it has: %s", plugin, revision, d.opts.HistoryMax, strings.Join(have, ", "))
	}
	return target, nil
}

// rollbackTo applies a recorded revision as a new revision described by desc.
func (d *Deployer) rollbackTo(ctx context.Context, wave int, target *Record, desc string) (*Record, error) {
	objs, err := d.store.Objects(ctx, target)
	if err != nil {
		return nil, err
	}
	u := Unit{
		Plugin: target.Plugin, Version: target.Version, Digest: target.PackageDigest, ValuesDigest: target.ValuesDigest,
		AllowDowngrade: target.AllowDowngrade, Requires: target.Requires, Objects: objs, rollback: target, description: desc,
	}
	if _, err := d.ApplyWave(ctx, wave, []Unit{u}); err != nil {
		return nil, err
	}
	if d.opts.DryRun {
		return target, nil // what would be restored; nothing was recorded
	}
	cur, _, err := state.Latest(ctx, d.store, target.Plugin)
	if err != nil {
		return nil, err
	}
	return cur, nil
}

// Revision is one entry of a plugin's history.
type Revision struct {
	Revision int    `json:"revision"`
	Version  string `json:"version"`
	// Values is the values digest, shortened.
	Values      string        `json:"values,omitempty"`
	Status      string        `json:"status"`
	Started     time.Time     `json:"started,omitzero"`
	Duration    time.Duration `json:"duration,omitempty"`
	Description string        `json:"description,omitempty"`
	Message     string        `json:"message,omitempty"`
	Objects     int           `json:"objects"`
}

// History returns a plugin's recorded revisions, oldest first. A Ready revision a
// later one replaced is Superseded; an Applying one that is not the newest (its run
// died) is Interrupted. It returns an empty list when the plugin is not installed.
func (d *Deployer) History(ctx context.Context, plugin string) ([]Revision, error) {
	recs, err := d.store.History(ctx, plugin)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, 0, len(recs))
	for i, r := range recs {
		st := r.Phase
		if i < len(recs)-1 {
			switch st {
			case PhaseReady:
				st = PhaseSuperseded
			case PhaseApplying:
				st = PhaseInterrupted
			}
		}
		v := strings.TrimPrefix(r.ValuesDigest, "sha256:")
		if len(v) > 12 {
			v = v[:12]
		}
		rev := Revision{Revision: r.Revision, Version: r.Version, Values: v, Status: st, Started: r.Started, Description: r.Description, Message: r.Message, Objects: len(r.Objects)}
		if !r.Finished.IsZero() && !r.Started.IsZero() {
			rev.Duration = r.Finished.Sub(r.Started)
		}
		out = append(out, rev)
	}
	return out, nil
}

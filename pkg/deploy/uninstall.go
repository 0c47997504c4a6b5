package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
)

// ErrRequired is returned when removing a plugin that an installed plugin requires.
var ErrRequired = errors.New("required by an installed plugin")

// Uninstall removes the named plugins' objects and release records. Plugins are removed
// dependents first: a plugin is removed only after every installed plugin that
// requires it. Removing a plugin that an installed plugin outside the set requires is
// refused (ErrRequired) unless cascade is set, in which case those dependents are
// removed too. It returns the plugins removed, in order.
func (d *Deployer) Uninstall(ctx context.Context, plugins []string, cascade bool) ([]string, error) {
	invs, err := d.Inventories(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Record{}
	for _, inv := range invs {
		byName[inv.Plugin] = inv
	}
	remove, err := d.toRemove(invs, byName, plugins, cascade)
	if err != nil {
		return nil, err
	}
	order, err := reverseOrder(byName, remove)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, p := range order {
		faultpoint.Hit("uninstall:before-plugin")
		n, err := d.remove(ctx, byName[p])
		if err != nil {
			d.emit(Event{Type: UninstallFailed, Plugin: p, Message: err.Error()})
			return done, fmt.Errorf("uninstall %s: %w", p, err)
		}
		ev := Event{Type: PluginRemoved, Plugin: p, Total: n}
		if d.opts.DryRun {
			ev.Message = "dry run"
		}
		d.emit(ev)
		faultpoint.Hit("uninstall:plugin-removed")
		done = append(done, p)
	}
	return done, nil
}

// toRemove is the set of plugins Uninstall removes: those of plugins that
// are installed (refusing one another installation manages), and, with
// cascade, every installed plugin that requires one of them; without
// cascade, such a dependent is refused (ErrRequired).
func (d *Deployer) toRemove(invs []*Record, byName map[string]*Record, plugins []string, cascade bool) (map[string]bool, error) {
	remove := map[string]bool{}
	for _, p := range plugins {
		if r := byName[p]; r != nil {
			if r.Owner != "" && r.Owner != d.opts.Owner && !d.opts.AnyOwner {
				return nil, fmt.Errorf("cannot uninstall %s: it is managed by PluginInstallation %s; remove it from that installation, or delete the installation", p, r.Owner)
			}
			remove[p] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, inv := range invs {
			if remove[inv.Plugin] {
				continue
			}
			for _, r := range inv.Requires {
				if !remove[r] {
					continue
				}
				if !cascade {
					return nil, fmt.Errorf("cannot uninstall %s: %w %s (uninstall it too, or use --cascade)", r, ErrRequired, inv.Plugin)
				}
				remove[inv.Plugin] = true
				changed = true
			}
		}
	}
	return remove, nil
}

// remove deletes what a plugin's newest release record lists, then every record of
// the plugin, and returns how many objects existed. It needs nothing but the
// record: a plugin no catalog has any more is removed all the same.
func (d *Deployer) remove(ctx context.Context, rec *Record) (int, error) {
	// Releases first, the reverse of install; Helm deletes their objects, which
	// deleteAll then finds gone.
	released := 0
	var helmKept []string
	for _, r := range slices.Backward(rec.Releases) {
		n, kept, err := d.helm.Remove(ctx, r)
		if err != nil {
			return 0, err
		}
		helmKept = append(helmKept, kept...)
		released += n
	}
	// The record lists the releases' objects too: one Helm kept must stay, and
	// is reported once.
	n, kept, err := d.ssa.DeleteAll(ctx, rec.Objects)
	seen := map[string]bool{}
	for _, r := range kept {
		seen[r.Kind+" "+r.Name] = true
	}
	d.keptEvents(0, rec.Plugin, refStrings(kept))
	d.keptEvents(0, rec.Plugin, slices.DeleteFunc(helmKept, func(k string) bool { return seen[k] }))
	if err != nil {
		return 0, err
	}
	faultpoint.Hit("uninstall:objects-deleted")
	if d.opts.DryRun {
		return n + released, nil // the records stay: nothing was removed
	}
	if err := d.store.Delete(ctx, rec.Plugin); err != nil {
		return 0, err
	}
	return n + released, nil
}

// reverseOrder orders the plugins to remove so that each comes after every plugin
// that requires it; ties break by name.
func reverseOrder(byName map[string]*Record, remove map[string]bool) ([]string, error) {
	var names []string
	for p := range remove {
		names = append(names, p)
	}
	slices.Sort(names)
	// dependents[p] counts the plugins still to remove that require p.
	dependents := map[string]int{}
	for _, p := range names {
		for _, r := range byName[p].Requires {
			if remove[r] {
				dependents[r]++
			}
		}
	}
	var out []string
	done := map[string]bool{}
	for len(out) < len(names) {
		progress := false
		for _, p := range names {
			if done[p] || dependents[p] > 0 {
				continue
			}
			done[p] = true
			out = append(out, p)
			progress = true
			for _, r := range byName[p].Requires {
				if remove[r] {
					dependents[r]--
				}
			}
		}
		if !progress {
			var left []string
			for _, p := range names {
				if !done[p] {
					left = append(left, p)
				}
			}
			return nil, fmt.Errorf("the installed plugins %s require each other in a cycle", strings.Join(left, ", "))
		}
	}
	return out, nil
}

// keptEvents reports the objects left in the cluster by their
// helm.sh/resource-policy: keep, one event each.
func (d *Deployer) keptEvents(wave int, plugin string, kept []string) {
	for _, o := range kept {
		d.emit(Event{Type: ObjectKept, Wave: wave, Plugin: plugin, Object: o, Message: "helm.sh/resource-policy: keep"})
	}
}

func refStrings(refs []ObjRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

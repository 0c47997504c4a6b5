package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// Without returns a copy of c that does not enable the named plugins (nor lists
// them in spec.plugins.order): the cluster as it is once they are uninstalled,
// for a run that brings the machines there. The file on disk is untouched, and
// the copy's diagnostics still point into it: an entry the removal moved is
// reported where it is written.
func (c *Cluster) Without(plugins ...string) *Cluster {
	cp, ps := c.edited()
	if ps == nil {
		return cp
	}
	var enabled []v1alpha1.PluginRef
	var entries []int
	for i, r := range ps.Enabled {
		if !slices.Contains(plugins, r.Name) {
			enabled = append(enabled, r)
			entries = append(entries, cp.fileIndex(i))
		}
	}
	ps.Enabled, cp.entries = enabled, entries
	ps.Order = slices.DeleteFunc(slices.Clone(ps.Order), func(n string) bool { return slices.Contains(plugins, n) })
	return cp
}

// Pinned returns a copy of c whose entry for plugin asks for exactly version
// (the constraint "=version"), keeping its values: the cluster as it is once
// the plugin is rolled back to that version. A plugin c does not enable is
// enabled at the end, with no values. The file on disk is untouched.
func (c *Cluster) Pinned(plugin, version string) *Cluster {
	cp, ps := c.edited()
	if ps == nil {
		ps = &v1alpha1.ClusterPlugins{}
		cp.Spec.Spec.Plugins = ps
	}
	i := slices.IndexFunc(ps.Enabled, func(r v1alpha1.PluginRef) bool { return r.Name == plugin })
	if i < 0 {
		ps.Enabled = append(ps.Enabled, v1alpha1.PluginRef{Name: plugin})
		i = len(ps.Enabled) - 1
		cp.entries = append(cp.allEntries(), -1)
	}
	ps.Enabled[i].Version = "=" + version
	return cp
}

// edited returns a copy of c whose enabled list and order may be changed
// without changing c, and its plugins section (nil when c has none).
func (c *Cluster) edited() (*Cluster, *v1alpha1.ClusterPlugins) {
	cp := *c
	spec := *c.Spec
	cp.Spec = &spec
	cp.entries = slices.Clone(c.entries)
	if spec.Spec.Plugins == nil {
		return &cp, nil
	}
	ps := *spec.Spec.Plugins
	ps.Enabled = slices.Clone(ps.Enabled)
	ps.Order = slices.Clone(ps.Order)
	spec.Spec.Plugins = &ps
	return &cp, &ps
}

// fileIndex is the index in the file of enabled entry i of c: another after
// an edit (Without); -1 for an entry the file does not have.
func (c *Cluster) fileIndex(i int) int {
	if c.entries == nil {
		return i
	}
	if i < len(c.entries) {
		return c.entries[i]
	}
	return -1
}

// allEntries is the file index of every enabled entry.
func (c *Cluster) allEntries() []int {
	out := make([]int, len(c.Enabled()))
	for i := range out {
		out[i] = c.fileIndex(i)
	}
	return out
}

// filePtr turns a JSON pointer into c's spec into one into its file: the
// same, unless it points into an enabled entry an edit moved (or added: then
// the enabled list).
func (c *Cluster) filePtr(ptr string) string {
	const prefix = "/spec/plugins/enabled/"
	if c.entries == nil || !strings.HasPrefix(ptr, prefix) {
		return ptr
	}
	rest := ptr[len(prefix):]
	n, tail, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(n)
	if err != nil {
		return ptr
	}
	fi := c.fileIndex(i)
	if fi < 0 {
		return strings.TrimSuffix(prefix, "/")
	}
	if tail != "" {
		tail = "/" + tail
	}
	return prefix + strconv.Itoa(fi) + tail
}

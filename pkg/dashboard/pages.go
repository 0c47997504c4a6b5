package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/internal/plangraph"
)

// page is what every page's layout shows.
type page struct {
	Title   string
	Nav     string
	Cluster string
	// HasFile says a cluster file was given (drift, values, plan, catalogs).
	HasFile bool
	Token   string
	// Base is where the dashboard is served (the pages' <base>): "/", or the
	// prefix it is mounted under. Self is the page's own address relative
	// to it, for in-page links.
	Base, Self string
	// ReadOnly hides actions.
	ReadOnly bool
	// Problems are the diagnostics of reading what the page shows.
	Problems []string
}

func (s *Server) page(r *http.Request, title, nav string) page {
	p := page{Title: title, Nav: nav, Token: s.token, HasFile: s.opts.Cluster != nil, Base: s.opts.Base, ReadOnly: s.opts.ReadOnly}
	p.Self = strings.TrimPrefix(r.URL.Path, "/")
	if r.URL.RawQuery != "" {
		p.Self += "?" + r.URL.RawQuery
	}
	if s.opts.Cluster != nil {
		p.Cluster = s.opts.Cluster.Spec.Metadata.Name
	} else if c := s.opts.Target.ContextName(); c != "" {
		p.Cluster = "context " + c
	}
	return p
}

// problems are l's messages, for a page.
func problems(l diag.List) []string {
	out := make([]string, 0, len(l))
	for _, d := range l {
		out = append(out, d.String())
	}
	return out
}

// pluginRow is one plugin of the cluster page.
type pluginRow struct {
	action.PluginReport
	// PhaseShown is the phase a person reads: Degraded when the last apply was
	// Ready but its objects are not now.
	PhaseShown string
	// DriftShown is the drift count, or "-" when unknown.
	DriftShown string
	// LastApply is when the newest revision started, and what it was.
	LastApply string
}

type clusterData struct {
	page
	Plugins []pluginRow
	Nodes   []nodeRow
}

type nodeRow struct {
	Name, Pool, Ready, Kubelet string
	// Contributions are what the plan's plugins contribute to the node's pool
	// (nodes.* constructs), with the cluster file only.
	Contributions []string
}

// report is Status.Report as kubeplug status -f runs it: the plugins with
// their readiness, and drift when there is a cluster file.
func (s *Server) report(ctx context.Context) ([]action.PluginReport, diag.List) {
	a := action.NewStatus(s.opts.Config)
	a.Target = s.opts.Target
	return a.Report(ctx, s.opts.Cluster)
}

func (s *Server) pluginRows(ctx context.Context) ([]pluginRow, diag.List) {
	st, l := s.report(ctx)
	rows := make([]pluginRow, 0, len(st))
	for _, r := range st {
		row := pluginRow{PluginReport: r, PhaseShown: r.Phase, DriftShown: "-"}
		if r.Degraded {
			row.PhaseShown = "Degraded"
		}
		if r.Drift != nil {
			row.DriftShown = strconv.Itoa(*r.Drift)
		}
		rows = append(rows, row)
	}
	// The last apply of each plugin, from its history (the newest revision).
	h := action.NewHistory(s.opts.Config)
	h.Target = s.opts.Target
	for i := range rows {
		if rows[i].Revision == 0 {
			continue
		}
		revs, hl := h.Run(ctx, rows[i].Plugin)
		if hl.HasFatal() || len(revs) == 0 {
			continue
		}
		last := revs[len(revs)-1]
		rows[i].LastApply = fmt.Sprintf("%s (revision %d: %s)", when(last.Started), last.Revision, last.Description)
	}
	return rows, l
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.DateTime + " MST")
}

func (s *Server) nodes(ctx context.Context) ([]nodeRow, error) {
	list, err := s.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	var contrib map[string][]string
	if s.opts.Cluster != nil {
		if doc, _ := action.NewPlan(s.opts.Config).Run(ctx, s.opts.Cluster); doc != nil {
			contrib = map[string][]string{}
			for _, c := range doc.Contributions {
				if !strings.HasPrefix(c.Kind, "nodes.") {
					continue
				}
				pool, rest, _ := strings.Cut(c.Key, "/")
				if p, _, ok := strings.Cut(c.Key, ":"); ok && c.Kind == "nodes.file" {
					pool, rest = p, strings.TrimPrefix(c.Key, p+":")
				}
				contrib[pool] = append(contrib[pool], fmt.Sprintf("%s %s (%s)", c.Kind, rest, c.Plugin))
			}
		}
	}
	out := make([]nodeRow, 0, len(list.Items))
	for _, n := range list.Items {
		row := nodeRow{Name: n.Name, Pool: n.Labels["kubeplug.dev/pool"], Ready: "Unknown", Kubelet: n.Status.NodeInfo.KubeletVersion}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				row.Ready = string(c.Status)
			}
		}
		if row.Pool == "" {
			row.Pool = "-"
		}
		row.Contributions = contrib[row.Pool]
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b nodeRow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request) {
	d := clusterData{page: s.page(r, "Cluster", "cluster")}
	rows, l := s.pluginRows(r.Context())
	d.Plugins, d.Problems = rows, problems(l)
	nodes, err := s.nodes(r.Context())
	if err != nil {
		d.Problems = append(d.Problems, err.Error())
	}
	d.Nodes = nodes
	s.render(w, http.StatusOK, "cluster.html", d)
}

func (s *Server) pluginsFragment(w http.ResponseWriter, r *http.Request) {
	d := clusterData{page: s.page(r, "Cluster", "cluster")}
	rows, l := s.pluginRows(r.Context())
	d.Plugins, d.Problems = rows, problems(l)
	s.render(w, http.StatusOK, "plugins", d)
}

// objectRow is one object of a plugin with its live state.
type objectRow struct {
	Object string
	// State is Ready, NotReady (Why says why), Missing or Drifted.
	State, Why string
}

type pluginData struct {
	page
	Name      string
	Found     bool
	Status    pluginRow
	Revisions []deploy.Revision
	Objects   []objectRow
	Releases  []string
	// Values are the plugin's values from the cluster file, sensitive ones
	// masked, as YAML; PoolValues by node pool.
	Values     string
	PoolValues map[string]string
	Diff       *action.RevisionDiff
	DiffFrom   int
	DiffTo     int
}

func (s *Server) pluginData(ctx context.Context, r *http.Request, name string) pluginData {
	d := pluginData{page: s.page(r, name, "cluster"), Name: name}
	rows, l := s.pluginRows(ctx)
	d.Problems = problems(l)
	for _, row := range rows {
		if row.Plugin == name {
			d.Status, d.Found = row, true
		}
	}
	if !d.Found {
		d.Problems = append(d.Problems, fmt.Sprintf("plugin %s is not installed in this cluster and the cluster file does not enable it", name))
		return d
	}
	h := action.NewHistory(s.opts.Config)
	h.Target = s.opts.Target
	if d.Status.Revision > 0 {
		revs, hl := h.Run(ctx, name)
		d.Problems = append(d.Problems, problems(hl)...)
		d.Revisions = revs
		if cur, cl := h.Compare(ctx, name, d.Status.Revision, d.Status.Revision); cur != nil {
			d.Objects = objectRows(cur.To.Objects, d.Status.PluginReport)
		} else {
			d.Problems = append(d.Problems, problems(cl)...)
		}
		d.Releases = d.Status.Releases
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("from"))
	to, _ := strconv.Atoi(r.URL.Query().Get("to"))
	if from > 0 && to > 0 {
		d.DiffFrom, d.DiffTo = from, to
		diff, dl := h.Compare(ctx, name, from, to)
		d.Problems = append(d.Problems, problems(dl)...)
		d.Diff = diff
	} else if n := len(d.Revisions); n >= 2 {
		d.DiffFrom, d.DiffTo = d.Revisions[n-2].Revision, d.Revisions[n-1].Revision
	}
	if s.opts.Cluster != nil {
		res, vl := action.NewValidate(s.opts.Config).Run(ctx, s.opts.Cluster)
		d.Problems = append(d.Problems, problems(vl)...)
		if res != nil {
			for _, p := range res.Plugins {
				if p.Name != name {
					continue
				}
				d.Values = toYAML(p.Values)
				for pool, v := range p.PoolValues {
					if d.PoolValues == nil {
						d.PoolValues = map[string]string{}
					}
					d.PoolValues[pool] = toYAML(v)
				}
			}
		}
	}
	return d
}

// objectRows gives each object of refs its state: Missing, NotReady (with
// why) or Drifted as st says, else Ready.
func objectRows(refs []deploy.ObjRef, st action.PluginReport) []objectRow {
	drifted := map[string]bool{}
	for _, o := range st.Drifted {
		drifted[o] = true
	}
	missing := map[string]bool{}
	for _, o := range st.MissingObjects {
		missing[o] = true
	}
	out := make([]objectRow, 0, len(refs))
	for _, ref := range refs {
		name := ref.String()
		row := objectRow{Object: name, State: "Ready"}
		for _, nr := range st.NotReady {
			if why, ok := strings.CutPrefix(nr, name+": "); ok {
				row.State, row.Why = "NotReady", why
			}
		}
		if missing[name] {
			row.State = "Missing"
		}
		if drifted[name] {
			if row.Why != "" {
				row.Why = row.State + ": " + row.Why
			}
			row.State = "Drifted"
		}
		out = append(out, row)
	}
	return out
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(cannot show: %v)", err)
	}
	return string(b)
}

func (s *Server) pluginPage(w http.ResponseWriter, r *http.Request) {
	d := s.pluginData(r.Context(), r, r.PathValue("name"))
	status := http.StatusOK
	if !d.Found {
		status = http.StatusNotFound
	}
	s.render(w, status, "plugin.html", d)
}

func (s *Server) pluginFragment(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "plugin-live", s.pluginData(r.Context(), r, r.PathValue("name")))
}

type planData struct {
	page
	SVG   template.HTML
	Waves [][]string
}

func (s *Server) plan(ctx context.Context) ([]byte, [][]string, diag.List) {
	if s.opts.Cluster == nil {
		var l diag.List
		l.Errorf("", 0, 0, "", "the plan needs a cluster file: start the dashboard with -f cluster.yaml")
		return nil, nil, l
	}
	doc, l := action.NewPlan(s.opts.Config).Run(ctx, s.opts.Cluster)
	if doc == nil {
		return nil, nil, l
	}
	return plangraph.SVG(doc), doc.Waves, l
}

func (s *Server) planPage(w http.ResponseWriter, r *http.Request) {
	d := planData{page: s.page(r, "Plan", "plan")}
	svg, waves, l := s.plan(r.Context())
	d.Problems, d.Waves = problems(l), waves
	// plangraph escapes every name it draws; the picture is inlined so that
	// screen readers get its title and description.
	d.SVG = template.HTML(svg) //nolint:gosec // drawn by plangraph, which escapes all text
	s.render(w, http.StatusOK, "plan.html", d)
}

func (s *Server) planSVG(w http.ResponseWriter, r *http.Request) {
	svg, _, l := s.plan(r.Context())
	if svg == nil {
		http.Error(w, strings.Join(problems(l), "\n"), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(svg)
}

type catalogData struct {
	page
	Plugins []action.PluginInfo
}

func (s *Server) catalogsPage(w http.ResponseWriter, r *http.Request) {
	d := catalogData{page: s.page(r, "Catalogs", "catalogs")}
	a := action.NewList(s.opts.Config)
	a.Cluster = s.opts.Cluster
	list, l := a.Run(r.Context())
	d.Plugins, d.Problems = list, problems(l)
	s.render(w, http.StatusOK, "catalogs.html", d)
}

var funcs = template.FuncMap{
	"short": func(s string) string {
		if len(s) > 19 {
			return s[:19] + "…"
		}
		return s
	},
	"when":  when,
	"lower": strings.ToLower,
}

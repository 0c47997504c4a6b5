package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options say which cluster the dashboard shows and with whose credentials.
type Options struct {
	// Config is the actions' shared configuration (catalogs, plugin
	// directories, environment for valuesFrom). Required.
	Config *action.Config
	// Target is the cluster, with the user's own credentials: every read and
	// every action of the dashboard is made with them. Callers with a cluster
	// file resolve it first (action.KubeconfigTarget.ForCluster).
	Target action.KubeconfigTarget
	// Cluster is the cluster file, optional: with it the dashboard shows drift,
	// the plugins' values (sensitive ones masked), the plan and the file's
	// catalogs; without it those say they need one.
	Cluster *config.Cluster
	// Namespace holds the release records the dashboard watches. Default
	// kubeplug-system, where the CLI keeps them.
	Namespace string
	// RollbackTimeout bounds how long a rollback waits for the plugin to be
	// ready. Default 5m.
	RollbackTimeout time.Duration
	// Logger receives the server's own problems. Default: discard.
	Logger *slog.Logger
	// Base is the path the dashboard is served under, with a slash at both
	// ends: "/dashboard/" when mounted beside other handlers (the
	// controller's metrics server). Default "/".
	Base string
	// ReadOnly serves the pages without their actions: no rollback page or
	// form. For a dashboard serving others with its own credentials.
	ReadOnly bool
	// Remote answers requests addressed to any host, not only loopback: for a
	// dashboard behind a Service or a port-forward. Only a ReadOnly dashboard
	// may be Remote, so that nobody acts with credentials not their own.
	Remote bool
}

// Server is the dashboard: an http.Handler and the watch that feeds its live
// updates (Run).
type Server struct {
	opts   Options
	tmpl   *template.Template
	static http.Handler
	// token is this server's form token: a POST without it is refused, so
	// another site the user visits cannot post a rollback (CSRF).
	token string
	core  kubernetes.Interface
	meta  metadata.Interface
	dyn   dynamic.Interface
	hub   *hub
	// watched are the resources whose objects the live view watches.
	watchedMu sync.Mutex
	watched   watchedSet
	mux       *http.ServeMux
}

// New checks opts and builds the server. It does not contact the cluster.
//
// Branches: one default or refusal per option, each independent of the others: a
// list of guarded assignments, not a decision to split.
func New(opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, errors.New("dashboard: Options.Config is required")
	}
	if opts.Namespace == "" {
		opts.Namespace = "kubeplug-system"
	}
	if opts.RollbackTimeout <= 0 {
		opts.RollbackTimeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Base == "" {
		opts.Base = "/"
	}
	if !strings.HasPrefix(opts.Base, "/") || !strings.HasSuffix(opts.Base, "/") {
		return nil, fmt.Errorf("dashboard: Options.Base %q must start and end with a slash", opts.Base)
	}
	if opts.Remote && !opts.ReadOnly {
		return nil, errors.New("dashboard: a Remote dashboard must be ReadOnly: it would act for others with its own credentials")
	}
	rc, err := opts.Target.Config()
	if err != nil {
		return nil, err
	}
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dashboard: a client for the cluster: %w", err)
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dashboard: a client for the cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dashboard: a client for the cluster: %w", err)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, tmpl: tmpl, static: http.StripPrefix("/static/", http.FileServerFS(static)), token: hex.EncodeToString(b), core: core, meta: meta, dyn: dyn, hub: newHub(), mux: http.NewServeMux(), watched: watchedSet{}}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux.Handle("GET /static/", s.static)
	if s.opts.ReadOnly {
		s.mux.HandleFunc("/plugins/{name}/rollback", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this dashboard is read-only: roll back with kubeplug rollback, or kubeplug dashboard with your own credentials", http.StatusForbidden)
		})
		s.mux.HandleFunc("/fleet/{namespace}/{name}/{action}", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this dashboard is read-only: use kubeplug dashboard with your own credentials", http.StatusForbidden)
		})
	} else {
		s.mux.HandleFunc("GET /plugins/{name}/rollback", s.rollbackConfirm)
		s.mux.HandleFunc("POST /plugins/{name}/rollback", s.rollback)
		s.mux.HandleFunc("GET /fleet/{namespace}/{name}/{action}", s.fleetConfirm)
		s.mux.HandleFunc("POST /fleet/{namespace}/{name}/{action}", s.fleetDo)
	}
	s.mux.HandleFunc("GET /{$}", s.clusterPage)
	s.mux.HandleFunc("GET /fragments/plugins", s.pluginsFragment)
	s.mux.HandleFunc("GET /plugins/{name}", s.pluginPage)
	s.mux.HandleFunc("GET /fragments/plugins/{name}", s.pluginFragment)
	s.mux.HandleFunc("GET /plan", s.planPage)
	s.mux.HandleFunc("GET /plan.svg", s.planSVG)
	s.mux.HandleFunc("GET /catalogs", s.catalogsPage)
	s.mux.HandleFunc("GET /fleet", s.fleetPage)
	s.mux.HandleFunc("GET /fragments/fleet", s.fleetFragment)
	s.mux.HandleFunc("GET /events", s.events)
}

// ServeHTTP serves the dashboard. Every response says not to be framed, cached
// or to run anything but the dashboard's own scripts; a request whose Host is
// not the loopback address the dashboard listens on is refused (DNS
// rebinding).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.opts.Remote && !loopbackHost(r.Host) {
		http.Error(w, "the dashboard answers only on its loopback address", http.StatusMisdirectedRequest)
		return
	}
	if s.opts.Base != "/" {
		http.StripPrefix(strings.TrimSuffix(s.opts.Base, "/"), s.mux).ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost says whether a request's Host names this machine's loopback:
// localhost, 127.0.0.0/8 or ::1.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Run watches the release records and pushes a change to every open page
// until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	return s.watch(ctx)
}

// checkForm refuses a POST that does not carry this server's token or that
// comes from another site.
func (s *Server) checkForm(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("refused: a %s request", site)
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" && !strings.HasSuffix(o, "://"+r.Host) {
		return fmt.Errorf("refused: a request from %s", o)
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(s.token)) != 1 {
		return errors.New("refused: the form's token is missing or stale; reload the page")
	}
	return nil
}

// render writes the named template with data; a template error is logged
// and answered with a 500 that says nothing of the data.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		s.opts.Logger.Error("rendering a page", "template", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

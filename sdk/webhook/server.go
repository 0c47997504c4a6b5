package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/sdk/internal/servingcert"
)

// maxReview bounds a review's body: an object and its old version, each at
// most the API server's request limit (3 MiB), and the review around them.
const maxReview = 7 << 20

// healthPaths answer "ok" without a review, for probes.
var healthPaths = []string{"/healthz", "/livez", "/readyz"}

// Options configure a Server. CertFile, KeyFile and Hooks are required.
type Options struct {
	// CertFile and KeyFile are the serving certificate (the mounted
	// <service>-serving-cert Secret kubeplug fills), re-read whenever they
	// change.
	CertFile, KeyFile string
	// Hooks by URL path, as the webhook's path in contributes.kubernetes.webhooks
	// ("/validate"). A path must start with "/" and not be a health path.
	Hooks map[string]Hook
	// Addr to listen on. Default :8443.
	Addr string
	// Logger receives requests the server cannot read and handlers that panic,
	// and each decision at debug level. Default: discarded.
	Logger *slog.Logger
}

// Server serves admission webhooks over HTTPS. Make it with New.
type Server struct {
	opts    Options
	handler http.Handler
}

// New checks the options and builds the handler: one per hook, and the
// health paths.
func New(opts Options) (*Server, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("webhook: CertFile and KeyFile are required (the mounted serving certificate Secret)")
	}
	if len(opts.Hooks) == 0 {
		return nil, errors.New("webhook: Hooks is empty")
	}
	if opts.Addr == "" {
		opts.Addr = ":8443"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	mux := http.NewServeMux()
	for _, p := range healthPaths {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	for path, h := range opts.Hooks {
		if !strings.HasPrefix(path, "/") || h == nil {
			return nil, fmt.Errorf("webhook: Hooks[%q]: a path starting with / and a hook are required", path)
		}
		for _, p := range healthPaths {
			if path == p {
				return nil, fmt.Errorf("webhook: Hooks[%q]: the path is the server's health check", path)
			}
		}
		mux.Handle(path, Handler(h, opts.Logger.With("path", path)))
	}
	return &Server{opts: opts, handler: mux}, nil
}

// Handler is the server's HTTP handler, for tests and for callers that serve
// it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves HTTPS on Options.Addr until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener the caller made; it closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	certs, err := servingcert.New(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("webhook: %w", err)
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug),
		TLSConfig:         certs.TLSConfig(),
	}
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler serves one hook: an AdmissionReview (admission.k8s.io/v1) in, the
// same kind out with the hook's response. A body that is not a review is 400,
// a hook that panics 500, both logged: for the API server the call failed,
// and the webhook's failurePolicy decides. The review's context ends at the
// timeout the API server sends (the webhook's timeoutSeconds).
func Handler(h Hook, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, msg string, args ...any) {
			log.Error(msg, args...)
			http.Error(w, msg, code)
		}
		if r.Method != http.MethodPost {
			fail(http.StatusMethodNotAllowed, "admission review: not a POST", "method", r.Method)
			return
		}
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
			fail(http.StatusUnsupportedMediaType, "admission review: not application/json", "contentType", r.Header.Get("Content-Type"))
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReview)).Decode(&review); err != nil {
			fail(http.StatusBadRequest, "admission review: unreadable", "error", err)
			return
		}
		if review.Request == nil || review.Request.UID == "" {
			fail(http.StatusBadRequest, "admission review: no request or no uid")
			return
		}
		req := review.Request
		ctx := r.Context()
		if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		resp, panicked := safeReview(ctx, h, req)
		if panicked != nil {
			fail(http.StatusInternalServerError, "admission review: the hook panicked", "panic", panicked, "uid", req.UID, "kind", req.Kind.Kind, "name", name(req))
			return
		}
		if resp == nil {
			resp = &admissionv1.AdmissionResponse{Allowed: true}
		}
		resp.UID = req.UID
		args := []any{"uid", req.UID, "operation", req.Operation, "kind", req.Kind.Kind, "name", name(req), "allowed", resp.Allowed, "patched", len(resp.Patch) > 0}
		if resp.Result != nil {
			args = append(args, "message", resp.Result.Message)
		}
		log.Debug("admission review", args...)
		out, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: resp,
		})
		if err != nil {
			fail(http.StatusInternalServerError, "admission review: encode the response", "error", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// safeReview runs the hook, turning a panic into a value.
func safeReview(ctx context.Context, h Hook, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse, panicked any) {
	defer func() { panicked = recover() }()
	return h.Review(ctx, req), nil
}

package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Resource is one kind the server serves.
type Resource struct {
	// Kind, for example Widget; its list is Kind+"List".
	Kind string
	// Plural is the resource name in URLs, for example widgets.
	Plural string
	// Namespaced resources live in namespaces; the rest are cluster-scoped.
	Namespaced bool
	// SelectableFields are the fields clients may name in field selectors
	// besides metadata.name and metadata.namespace, as JSON paths of a
	// string, number or boolean (".spec.color"), as a CustomResourceDefinition's
	// selectableFields; the selector names them without the dot (spec.color).
	SelectableFields []string
}

// Options configure a Server. Group, Version, Resources, Client and Storage are
// required.
type Options struct {
	// Group and Version served, for example widgets.example.com and v1alpha1.
	Group, Version string
	Resources      []Resource
	// Client talks to the cluster: delegated authentication, authorization and
	// storage. In a Pod: kubernetes.NewForConfig(rest.InClusterConfig()).
	Client kubernetes.Interface
	// Storage is the namespace whose ConfigMaps keep the objects (the server's own).
	Storage string
	// CertFile and KeyFile are the serving certificate (the mounted
	// <service>-serving-cert Secret), re-read whenever they change.
	CertFile, KeyFile string
	// Addr to listen on. Default :8443.
	Addr string
	// Validate, when set, is called on every object created, updated or patched;
	// an error refuses it (422 Invalid). Return a *field.Error to name the field,
	// as the API server's own messages do.
	Validate func(ctx context.Context, obj *unstructured.Unstructured) error
	// Logger receives request errors, and each API request at debug level.
	// Default: discarded.
	Logger *slog.Logger
}

// Server serves one group version. Make it with New.
type Server struct {
	opts      Options
	store     *store
	resources map[string]Resource
	handler   http.Handler
	run       []func(ctx context.Context)
}

var codecs = serializer.NewCodecFactory(runtime.NewScheme())

// New checks the options, reads the cluster's authentication configuration
// (bounded by ctx) and builds the handler chain: request info, delegated
// authentication, delegated authorization, then the API.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Group == "" || opts.Version == "" || len(opts.Resources) == 0 {
		return nil, errors.New("apiserver: Group, Version and Resources are required")
	}
	if opts.Client == nil || opts.Storage == "" {
		return nil, errors.New("apiserver: Client and Storage are required (the storage is delegated to the cluster)")
	}
	if opts.Addr == "" {
		opts.Addr = ":8443"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{opts: opts, store: &store{client: opts.Client, namespace: opts.Storage, group: opts.Group, version: opts.Version}, resources: map[string]Resource{}}
	for _, r := range opts.Resources {
		if r.Kind == "" || r.Plural == "" {
			return nil, fmt.Errorf("apiserver: resource %+v needs a Kind and a Plural", r)
		}
		if err := checkSelectableFields(r); err != nil {
			return nil, err
		}
		s.resources[r.Plural] = r
	}
	authn, err := s.authenticator(ctx)
	if err != nil {
		return nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: opts.Client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              2 * time.Second,
		WebhookRetryBackoff:       &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("apiserver: delegated authorization: %w", err)
	}
	var h http.Handler = http.HandlerFunc(s.serveAPI)
	h = genericfilters.WithAuthorization(h, authz, codecs)
	h = genericfilters.WithAuthentication(h, authn, genericfilters.Unauthorized(codecs), nil, nil)
	h = genericfilters.WithRequestInfo(h, &genericrequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")})
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	mux.Handle("/", h)
	s.handler = mux
	return s, nil
}

// authenticator delegates to the cluster: the front proxy's client certificate
// and headers, as the extension-apiserver-authentication ConfigMap says, then
// bearer tokens through TokenReview.
func (s *Server) authenticator(ctx context.Context) (authenticator.Request, error) {
	const ns, name = "kube-system", "extension-apiserver-authentication"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cm, err := s.opts.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("apiserver: read %s/%s (does the ServiceAccount have the extension-apiserver-authentication-reader Role?): %w", ns, name, err)
	}
	list := func(key string) headerrequest.StaticStringSlice {
		var out []string
		_ = json.Unmarshal([]byte(cm.Data[key]), &out)
		return out
	}
	cfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  s.opts.Client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
		CacheTTL:                 10 * time.Second,
	}
	if cm.Data["requestheader-client-ca-file"] != "" {
		ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca", ns, name, "requestheader-client-ca-file", s.opts.Client)
		if err != nil {
			return nil, fmt.Errorf("apiserver: front proxy CA: %w", err)
		}
		if err := ca.RunOnce(ctx); err != nil {
			return nil, fmt.Errorf("apiserver: front proxy CA: %w", err)
		}
		s.run = append(s.run, func(ctx context.Context) { ca.Run(ctx, 1) })
		cfg.RequestHeaderConfig = &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider:   ca,
			UsernameHeaders:     list("requestheader-username-headers"),
			UIDHeaders:          list("requestheader-uid-headers"),
			GroupHeaders:        list("requestheader-group-headers"),
			ExtraHeaderPrefixes: list("requestheader-extra-headers-prefix"),
			AllowedClientNames:  list("requestheader-allowed-names"),
		}
	}
	authn, _, err := cfg.New()
	if err != nil {
		return nil, fmt.Errorf("apiserver: delegated authentication: %w", err)
	}
	return authn, nil
}

// Handler is the server's HTTP handler, for tests and for callers that serve it
// themselves. Requests must come over TLS with the client certificate for the
// front proxy's authentication to see it.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves HTTPS on Options.Addr until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener the caller made.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	certs := &certReloader{certFile: s.opts.CertFile, keyFile: s.opts.KeyFile}
	if _, err := certs.get(nil); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, run := range s.run {
		go run(ctx)
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.get,
			// The front proxy's certificate is verified by the authenticator,
			// against the CA the cluster publishes (it may change at run time).
			ClientAuth: tls.RequestClientCert,
		},
	}
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// certReloader serves the certificate files, re-read when they change: kubeplug
// renews the Secret, the kubelet updates the mounted files, and the next
// handshake presents the new certificate.
type certReloader struct {
	certFile, keyFile string
	mu                sync.Mutex
	stamp             string
	cert              *tls.Certificate
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp := ""
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("apiserver: serving certificate: %w", err)
		}
		stamp += fmt.Sprint(fi.ModTime().UnixNano(), fi.Size(), ";")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && stamp == c.stamp {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // half-written by the kubelet: keep serving the old one
		}
		return nil, fmt.Errorf("apiserver: serving certificate: %w", err)
	}
	c.cert, c.stamp = &cert, stamp
	return c.cert, nil
}

// serveAPI answers discovery and the resources' verbs.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	info, _ := genericrequest.RequestInfoFrom(r.Context())
	gv := s.opts.Group + "/" + s.opts.Version
	switch {
	case r.URL.Path == "/apis" || r.URL.Path == "/apis/":
		s.write(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{s.group()}})
		return
	case r.URL.Path == "/apis/"+s.opts.Group:
		g := s.group()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		s.write(w, http.StatusOK, &g)
		return
	case r.URL.Path == "/apis/"+gv:
		s.write(w, http.StatusOK, s.resourceList())
		return
	case info == nil || !info.IsResourceRequest || info.APIGroup != s.opts.Group || info.APIVersion != s.opts.Version:
		s.fail(w, apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource("paths").GroupResource(), r.URL.Path))
		return
	}
	s.opts.Logger.Debug("request", "verb", info.Verb, "resource", info.Resource, "namespace", info.Namespace, "name", info.Name, "query", r.URL.RawQuery)
	res, ok := s.resources[info.Resource]
	if !ok || info.Subresource != "" {
		s.fail(w, apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource(info.Resource).GroupResource(), r.URL.Path))
		return
	}
	if !res.Namespaced && info.Namespace != "" {
		s.fail(w, apierrors.NewBadRequest(res.Plural+" are cluster-scoped"))
		return
	}
	if res.Namespaced && info.Namespace == "" && info.Verb != "list" && info.Verb != "watch" {
		s.fail(w, apierrors.NewBadRequest(res.Plural+" are namespaced: the URL needs /namespaces/<namespace>/"))
		return
	}
	ctx := r.Context()
	var (
		out runtime.Object
		err error
	)
	code := http.StatusOK
	switch info.Verb {
	case "get":
		out, err = s.store.get(ctx, res, info.Namespace, info.Name)
	case "list":
		var (
			q *listQuery
			l *unstructured.UnstructuredList
		)
		if q, err = s.parseList(r.URL.Query(), res, info.Namespace, false); err == nil {
			if l, err = s.store.list(ctx, res, q); err == nil {
				l.SetAPIVersion(gv)
				l.SetKind(res.Kind + "List")
				out = l
			}
		}
	case "watch":
		s.serveWatch(w, r, res, info.Namespace)
		return
	case "create":
		var u *unstructured.Unstructured
		if u, err = s.decodeBody(r, res, info.Namespace, ""); err == nil {
			if out, err = s.store.create(ctx, res, u); err == nil {
				code = http.StatusCreated
			}
		}
	case "update":
		var u *unstructured.Unstructured
		if u, err = s.decodeBody(r, res, info.Namespace, info.Name); err == nil {
			out, err = s.store.update(ctx, res, u)
		}
	case "patch":
		out, err = s.patch(r, res, info.Namespace, info.Name)
	case "delete":
		out, err = s.store.delete(ctx, res, info.Namespace, info.Name)
	default:
		err = apierrors.NewMethodNotSupported(s.store.groupResource(res), info.Verb)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.write(w, code, out)
}

func (s *Server) group() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: s.opts.Group + "/" + s.opts.Version, Version: s.opts.Version}
	return metav1.APIGroup{Name: s.opts.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func (s *Server) resourceList() *metav1.APIResourceList {
	l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: s.opts.Group + "/" + s.opts.Version}
	for _, r := range s.opts.Resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: r.Plural, Kind: r.Kind, Namespaced: r.Namespaced,
			SingularName: strings.ToLower(r.Kind),
			Verbs:        metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"},
		})
	}
	return l
}

// decodeBody reads an object from a request and checks it belongs where the URL
// says.
func (s *Server) decodeBody(r *http.Request, res Resource, ns, name string) (*unstructured.Unstructured, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return u, s.check(r.Context(), u, res, ns, name)
}

func (s *Server) check(ctx context.Context, u *unstructured.Unstructured, res Resource, ns, name string) error {
	gv := s.opts.Group + "/" + s.opts.Version
	switch {
	case u.GetAPIVersion() != gv || u.GetKind() != res.Kind:
		return apierrors.NewBadRequest(fmt.Sprintf("expected apiVersion %s and kind %s, found %q and %q", gv, res.Kind, u.GetAPIVersion(), u.GetKind()))
	case name != "" && u.GetName() != name:
		return apierrors.NewBadRequest(fmt.Sprintf("the name in the body (%q) does not match the URL (%q)", u.GetName(), name))
	}
	if res.Namespaced {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		} else if u.GetNamespace() != ns {
			return apierrors.NewBadRequest(fmt.Sprintf("the namespace in the body (%q) does not match the URL (%q)", u.GetNamespace(), ns))
		}
	}
	gk := schema.GroupKind{Group: s.opts.Group, Kind: res.Kind}
	if errs := validation.IsDNS1123Subdomain(u.GetName()); len(errs) > 0 {
		return apierrors.NewInvalid(gk, u.GetName(), field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), u.GetName(), strings.Join(errs, "; "))})
	}
	// Labels are copied onto the storage's ConfigMap for selectors: they must
	// be valid labels and leave the server's prefix alone.
	lp := field.NewPath("metadata", "labels")
	errs := metav1validation.ValidateLabels(u.GetLabels(), lp)
	for k := range u.GetLabels() {
		if strings.HasPrefix(k, sdkPrefix) {
			errs = append(errs, field.Invalid(lp.Key(k), k, "the prefix "+sdkPrefix+" is the server's own"))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gk, u.GetName(), errs)
	}
	if s.opts.Validate != nil {
		if err := s.opts.Validate(ctx, u); err != nil {
			fe := field.Invalid(field.NewPath("spec"), nil, err.Error())
			_ = errors.As(err, &fe)
			return apierrors.NewInvalid(gk, u.GetName(), field.ErrorList{fe})
		}
	}
	return nil
}

// patch applies a JSON merge patch or a JSON patch to the stored object.
func (s *Server) patch(r *http.Request, res Resource, ns, name string) (runtime.Object, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	cur, err := s.store.get(r.Context(), res, ns, name)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	switch ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); ct {
	case "application/merge-patch+json":
		doc, err = jsonpatch.MergePatch(doc, raw)
	case "application/json-patch+json":
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(raw); err == nil {
			doc, err = p.Apply(doc)
		}
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", s.store.groupResource(res), name,
			"supported patch types: application/merge-patch+json, application/json-patch+json", 0, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("patch: " + err.Error())
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(doc, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := s.check(r.Context(), u, res, ns, name); err != nil {
		return nil, err
	}
	return s.store.update(r.Context(), res, u)
}

// serveWatch streams watch events as the API server does: one JSON object per
// event, flushed as it comes.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, res Resource, ns string) {
	q, err := s.parseList(r.URL.Query(), res, ns, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	wi, err := s.store.watch(r.Context(), res, q)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if err := enc.Encode(map[string]any{"type": e.Type, "object": e.Object}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

func (s *Server) write(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if status.Code >= 500 {
		s.opts.Logger.Error("request failed", "error", err)
	}
	s.write(w, int(status.Code), &status)
}

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
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
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
	"k8s.io/kube-openapi/pkg/handler3"

	"github.com/kubeplug/kubeplug/sdk/internal/servingcert"
)

// Resource is one kind the server serves.
type Resource struct {
	// Kind, for example Widget; its list is Kind+"List".
	Kind string
	// Plural is the resource name in URLs, for example widgets.
	Plural string
	// Namespaced resources live in namespaces; the rest are cluster-scoped.
	Namespaced bool
	// Schema is the kind's OpenAPI v3 schema, as a CustomResourceDefinition's
	// openAPIV3Schema (structural). With it, objects are pruned of unknown
	// fields (refused with fieldValidation=Strict, as kubectl asks), defaulted
	// and validated before Validate runs, and the published OpenAPI describes
	// them for kubectl explain. Without it, any object is accepted.
	Schema *apiextensionsv1.JSONSchemaProps
	// Columns are kubectl get's columns after NAME, as a CRD's
	// additionalPrinterColumns. Default: AGE.
	Columns []apiextensionsv1.CustomResourceColumnDefinition
	// Status serves the status subresource: .status is written only through
	// /status, and updates of the object keep it.
	Status bool
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
	// Storage is the namespace whose Secrets (of SecretType) keep the objects
	// (the server's own); ConfigMaps an earlier version kept there are moved
	// into Secrets when the server starts.
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
	opts    Options
	store   *store
	kinds   map[string]*kind
	openapi *handler3.OpenAPIService
	handler http.Handler
	run     []func(ctx context.Context)
}

// codecs write the filters' answers (401, 403) as the API server does: a
// Status, which the scheme must know, else the answer is a 500 and a logged
// "no kind is registered for the type v1.Status".
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme)
}()

// New checks the options, reads the cluster's authentication configuration
// (bounded by ctx) and builds the handler chain: request info, delegated
// authentication, delegated authorization, then the API.
//
// Branches: one default or refusal per option, then the handler chain's steps
// in their fixed order, each returning its error: guarded steps, not a
// decision to split.
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
	s := &Server{opts: opts, store: &store{client: opts.Client, namespace: opts.Storage, group: opts.Group, version: opts.Version}, kinds: map[string]*kind{}}
	var kinds []*kind
	for _, r := range opts.Resources {
		if r.Kind == "" || r.Plural == "" {
			return nil, fmt.Errorf("apiserver: resource %+v needs a Kind and a Plural", r)
		}
		if err := checkSelectableFields(r); err != nil {
			return nil, err
		}
		if s.kinds[r.Plural] != nil {
			return nil, fmt.Errorf("apiserver: resource %s is declared twice", r.Plural)
		}
		k, err := newKind(opts.Group, opts.Version, r)
		if err != nil {
			return nil, err
		}
		s.kinds[r.Plural] = k
		kinds = append(kinds, k)
	}
	var err error
	if s.openapi, err = openAPI(opts.Group, opts.Version, kinds); err != nil {
		return nil, err
	}
	if err := s.store.migrateStorage(ctx, opts.Resources); err != nil {
		return nil, err
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
	certs, err := servingcert.New(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
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
		TLSConfig:         certs.TLSConfig(),
	}
	// The front proxy's certificate is verified by the authenticator, against
	// the CA the cluster publishes (it may change at run time).
	hs.TLSConfig.ClientAuth = tls.RequestClientCert
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

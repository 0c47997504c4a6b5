// Command widgets-apiserver serves widgets.example.com/v1alpha1 through the
// cluster's API server with sdk/apiserver: authentication, authorization and
// storage all delegated to the cluster. The widgets-api plugin runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/sdk/apiserver"
)

func main() {
	addr := flag.String("addr", ":8443", "address to serve HTTPS on")
	certDir := flag.String("cert-dir", "/serving", "directory of tls.crt and tls.key (the mounted serving Secret)")
	storage := flag.String("storage-namespace", os.Getenv("POD_NAMESPACE"), "namespace whose Secrets keep the widgets")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig; default: the Pod's service account")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *certDir, *storage, *kubeconfig, log); err != nil {
		log.Error("widgets-apiserver", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, certDir, storage, kubeconfig string, log *slog.Logger) error {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	srv, err := apiserver.New(ctx, apiserver.Options{
		Group: "widgets.example.com", Version: "v1alpha1",
		Resources: []apiserver.Resource{widgets},
		Client:    client, Storage: storage,
		CertFile: certDir + "/tls.crt", KeyFile: certDir + "/tls.key",
		Addr: addr, Logger: log,
	})
	if err != nil {
		return err
	}
	log.Info("serving", "addr", addr, "group", "widgets.example.com/v1alpha1", "storage", storage)
	if err := srv.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// widgets is the Widget kind: its schema (kubectl validates and explains it;
// the server prunes, defaults and checks it), the columns of kubectl get, a
// status subresource and a field clients may select by.
var widgets = apiserver.Resource{
	Kind: "Widget", Plural: "widgets", Namespaced: true, Status: true,
	SelectableFields: []string{".spec.color"},
	Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size":  {Type: "integer", Minimum: ptr(1.0), Maximum: ptr(100.0), Description: "How many pieces the widget has, 1 to 100."},
				"color": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}, Description: "The widget's color; default blue."},
			}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"phase": {Type: "string", Description: "Where the widget is."},
			}},
		},
	},
	Columns: []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
		{Name: "Color", Type: "string", JSONPath: ".spec.color"},
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	},
}

func ptr[T any](v T) *T { return &v }

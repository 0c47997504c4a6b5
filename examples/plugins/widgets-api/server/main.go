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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/sdk/apiserver"
)

func main() {
	addr := flag.String("addr", ":8443", "address to serve HTTPS on")
	certDir := flag.String("cert-dir", "/serving", "directory of tls.crt and tls.key (the mounted serving Secret)")
	storage := flag.String("storage-namespace", os.Getenv("POD_NAMESPACE"), "namespace whose ConfigMaps keep the widgets")
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
		Resources: []apiserver.Resource{{Kind: "Widget", Plural: "widgets", Namespaced: true}},
		Client:    client, Storage: storage,
		CertFile: certDir + "/tls.crt", KeyFile: certDir + "/tls.key",
		Addr: addr, Logger: log,
		Validate: func(_ context.Context, w *unstructured.Unstructured) error {
			v, found, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "size")
			if !found {
				return nil
			}
			// JSON numbers arrive as float64.
			if f, ok := v.(float64); !ok || f != float64(int64(f)) || f < 1 || f > 100 {
				return field.Invalid(field.NewPath("spec", "size"), v, "must be an integer from 1 to 100")
			}
			return nil
		},
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

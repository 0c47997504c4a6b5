// Command backup-operator is the backup-operator example plugin's extension
// operator: it finalizes Backup objects (backups.ops.example.com) and reports
// each one Ready in its status, which the plugin's validate check waits for.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const finalizer = "ops.example.com/cleanup"

var backups = schema.GroupVersionResource{Group: "ops.example.com", Version: "v1", Resource: "backups"}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig; default: the Pod's service account")
	interval := flag.Duration("interval", time.Second, "how often every Backup is looked at")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		log.Error("config", "error", err)
		os.Exit(1)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		log.Error("client", "error", err)
		os.Exit(1)
	}
	log.Info("reconciling", "resource", backups.String())
	for ctx.Err() == nil {
		if err := reconcileAll(ctx, client, log); err != nil && ctx.Err() == nil {
			log.Error("reconcile", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(*interval):
		}
	}
}

// reconcileAll brings every Backup to its state: a finalizer while it lives,
// Ready=True for its generation, and the finalizer removed once it is deleted.
func reconcileAll(ctx context.Context, client dynamic.Interface, log *slog.Logger) error {
	list, err := client.Resource(backups).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		b := &list.Items[i]
		ri := client.Resource(backups).Namespace(b.GetNamespace())
		fins := b.GetFinalizers()
		switch {
		case b.GetDeletionTimestamp() != nil:
			if !slices.Contains(fins, finalizer) {
				continue
			}
			log.Info("cleaning up", "backup", b.GetNamespace()+"/"+b.GetName())
			b.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == finalizer }))
			_, err = ri.Update(ctx, b, metav1.UpdateOptions{})
		case !slices.Contains(fins, finalizer):
			b.SetFinalizers(append(fins, finalizer))
			_, err = ri.Update(ctx, b, metav1.UpdateOptions{})
		case !ready(b):
			cond := map[string]any{
				"type": "Ready", "status": "True", "reason": "Scheduled", "message": "the backup is scheduled",
				"observedGeneration": b.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			}
			_ = unstructured.SetNestedSlice(b.Object, []any{cond}, "status", "conditions")
			_ = unstructured.SetNestedField(b.Object, b.GetGeneration(), "status", "observedGeneration")
			_, err = ri.UpdateStatus(ctx, b, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func ready(b *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(b.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			return g == b.GetGeneration()
		}
	}
	return false
}

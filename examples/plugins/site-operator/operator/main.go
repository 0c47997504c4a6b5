// Command site-operator is the site-operator example plugin's operator, written
// with sdk/siteoperator: it proves one condition an expansion delegates to it
// (its probe: the API server answers /readyz, standing in for a site's own
// storage or network check) and sets it on its SiteCondition.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeplug/kubeplug/sdk/siteoperator"
)

func main() {
	name := flag.String("operator", "site-storage", "the SiteCondition this operator owns")
	condition := flag.String("condition", "StorageReady", "the condition it proves")
	interval := flag.Duration("interval", time.Second, "how often it probes")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Error("config", "error", err)
		os.Exit(1)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Error("client", "error", err)
		os.Exit(1)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error("client", "error", err)
		os.Exit(1)
	}
	op := &siteoperator.Operator{Name: *name, Client: c, Interval: *interval, Logger: log,
		Probes: map[string]siteoperator.Probe{*condition: func(ctx context.Context) (bool, string, error) {
			if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
				return false, "the API server is not ready: " + err.Error(), nil
			}
			return true, "the API server answers /readyz", nil
		}}}
	log.Info("proving", "operator", *name, "condition", *condition)
	if err := op.Run(ctx); err != nil {
		log.Error("run", "error", err)
		os.Exit(1)
	}
}

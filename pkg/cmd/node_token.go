package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/pkg/provider/bootstraptoken"
)

// storeTokenOptions configure storeToken (`kubeplug node store-token`).
type storeTokenOptions struct {
	// Client reaches the cluster's API server as an administrator (the
	// control-plane machine's admin.conf). Required.
	Client kubernetes.Interface
	// TokenFile holds the bootstrap token, "<id>.<secret>". Required.
	TokenFile string
	// Group is the extra group the token's kubelets authenticate in; the RBAC
	// that lets them bootstrap is bound to it. Required.
	Group string
	// Owner names the ClusterRoleBindings ("kubeplug:OWNER:bootstrapper").
	// Default "machines".
	Owner string
	// TTL is how long the token serves a kubelet's first TLS bootstrap, from
	// when it is first stored. Default 24h.
	TTL time.Duration
	// Wait is how long an API server that does not answer yet (its static
	// Pod is starting) is asked again; Interval how often. Defaults 0 (fail
	// at once) and 5s.
	Wait, Interval time.Duration
	// Logger receives progress; discarded when nil.
	Logger *slog.Logger
}

// storeToken stores a bootstrap token made up front as the control plane's
// first act, as kubeadm's init does: the bootstrap token Secret (kept when it
// is there) and the RBAC that lets its kubelets get client certificates, and
// the nodes renew theirs, approved (bootstraptoken.Store). It is
// asked again until opts.Wait ends; the error names the token file.
func storeToken(ctx context.Context, opts storeTokenOptions) error {
	if opts.Owner == "" {
		opts.Owner = "machines"
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := os.ReadFile(opts.TokenFile)
	if err != nil {
		return fmt.Errorf("store the bootstrap token: %w", err)
	}
	t := bootstraptoken.Token{Token: strings.TrimSpace(string(b)), Group: opts.Group, Owner: opts.Owner, TTL: opts.TTL}
	deadline := time.Now().Add(opts.Wait)
	for {
		err := bootstraptoken.Store(ctx, opts.Client, t)
		if err == nil {
			opts.Logger.Info("bootstrap token stored", "file", opts.TokenFile, "group", opts.Group)
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("store the bootstrap token of %s: %w", opts.TokenFile, err)
		}
		opts.Logger.Info("bootstrap token not stored yet", "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("store the bootstrap token of %s: %w", opts.TokenFile, ctx.Err())
		case <-time.After(opts.Interval):
		}
	}
}

package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd starts a single etcd member through go.etcd.io/etcd/server/v3/embed.
//
// It accepts the subset of etcd's flags, with etcd's names, that a local control
// plane and controller-runtime's envtest pass; anything else is an error rather
// than silently ignored. It serves until SIGTERM or SIGINT, then closes the
// server, which flushes the backend, and exits 0.
func runEtcd(args []string) int {
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	var (
		listenClient, advertiseClient, listenPeer, advertisePeer, listenMetrics string
		quota                                                                   int64
		logLevel                                                                string
		waitStart                                                               time.Duration
	)
	fs.StringVar(&cfg.Name, "name", cfg.Name, "human-readable name for this member")
	fs.StringVar(&cfg.Dir, "data-dir", "default.etcd", "path to the data directory")
	fs.StringVar(&cfg.WalDir, "wal-dir", "", "path to the dedicated wal directory")
	fs.StringVar(&listenClient, "listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to listen on for client traffic")
	fs.StringVar(&advertiseClient, "advertise-client-urls", "", "comma-separated client URLs to advertise (default: listen-client-urls)")
	fs.StringVar(&listenPeer, "listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to listen on for peer traffic")
	fs.StringVar(&advertisePeer, "initial-advertise-peer-urls", "", "comma-separated peer URLs to advertise (default: listen-peer-urls)")
	fs.StringVar(&listenMetrics, "listen-metrics-urls", "", "comma-separated URLs to serve /metrics and /health on")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "initial cluster configuration (default: NAME=initial-advertise-peer-urls)")
	fs.StringVar(&cfg.ClusterState, "initial-cluster-state", embed.ClusterStateFlagNew, "new or existing")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", cfg.InitialClusterToken, "initial cluster token")
	fs.BoolVar(&cfg.UnsafeNoFsync, "unsafe-no-fsync", false, "disable fsync: faster, not crash safe (fine for throw-away test clusters)")
	fs.Int64Var(&quota, "quota-backend-bytes", 0, "backend size limit in bytes (0: etcd default)")
	fs.Uint64Var(&cfg.SnapshotCount, "snapshot-count", cfg.SnapshotCount, "committed transactions that trigger a snapshot")
	fs.StringVar(&cfg.AutoCompactionMode, "auto-compaction-mode", cfg.AutoCompactionMode, "periodic or revision")
	fs.StringVar(&cfg.AutoCompactionRetention, "auto-compaction-retention", cfg.AutoCompactionRetention, "auto compaction retention")
	fs.StringVar(&logLevel, "log-level", "warn", "debug, info, warn, error, panic or fatal")
	fs.StringVar(&cfg.ClientTLSInfo.CertFile, "cert-file", "", "client server TLS cert file")
	fs.StringVar(&cfg.ClientTLSInfo.KeyFile, "key-file", "", "client server TLS key file")
	fs.StringVar(&cfg.ClientTLSInfo.TrustedCAFile, "trusted-ca-file", "", "client server TLS trusted CA file")
	fs.BoolVar(&cfg.ClientTLSInfo.ClientCertAuth, "client-cert-auth", false, "enable client cert authentication")
	// Peer TLS: the members of a stacked control plane talk over the node
	// network.
	fs.StringVar(&cfg.PeerTLSInfo.CertFile, "peer-cert-file", "", "peer server TLS cert file")
	fs.StringVar(&cfg.PeerTLSInfo.KeyFile, "peer-key-file", "", "peer server TLS key file")
	fs.StringVar(&cfg.PeerTLSInfo.TrustedCAFile, "peer-trusted-ca-file", "", "peer server TLS trusted CA file")
	fs.BoolVar(&cfg.PeerTLSInfo.ClientCertAuth, "peer-client-cert-auth", false, "enable peer client cert authentication")
	fs.DurationVar(&waitStart, "start-timeout", time.Minute, "how long to wait for the member to become ready")
	printVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printVersion {
		// The same first lines as etcd's own --version, for tools that parse it.
		fmt.Printf("etcd Version: %s\nGit SHA: %s\nGo Version: %s\nGo OS/Arch: %s/%s\n",
			version.Version, version.GitSHA, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "etcd: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if advertiseClient == "" {
		advertiseClient = listenClient
	}
	if advertisePeer == "" {
		advertisePeer = listenPeer
	}
	var err error
	for _, f := range []struct {
		name string
		in   string
		out  *[]url.URL
	}{
		{"listen-client-urls", listenClient, &cfg.ListenClientUrls},
		{"advertise-client-urls", advertiseClient, &cfg.AdvertiseClientUrls},
		{"listen-peer-urls", listenPeer, &cfg.ListenPeerUrls},
		{"initial-advertise-peer-urls", advertisePeer, &cfg.AdvertisePeerUrls},
		{"listen-metrics-urls", listenMetrics, &cfg.ListenMetricsUrls},
	} {
		if *f.out, err = parseURLs(f.in); err != nil {
			fmt.Fprintf(os.Stderr, "etcd: flag --%s: %v\n", f.name, err)
			return 2
		}
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	if quota > 0 {
		cfg.QuotaBackendBytes = quota
	}
	cfg.LogLevel = logLevel
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}

	// Register for signals before starting so a fast SIGTERM is not lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(waitStart):
		fmt.Fprintf(os.Stderr, "etcd: member not ready after %s\n", waitStart)
		return 1
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %s before ready, stopping\n", s)
		return 0
	}
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: serve: %v\n", err)
		return 1
	case <-e.Server.StopNotify():
		fmt.Fprintln(os.Stderr, "etcd: server stopped")
		return 1
	case <-sig:
		return 0
	}
}

func parseURLs(s string) ([]url.URL, error) {
	if s == "" {
		return nil, nil
	}
	var out []url.URL
	for _, raw := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("parse url %q: %w", raw, err)
		}
		out = append(out, *u)
	}
	return out, nil
}

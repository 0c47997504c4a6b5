package controlplane

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"time"
)

// Defaults used by Options.withDefaults when a field is left zero.
const (
	// DefaultStartTimeout bounds Start when the caller's context has no deadline.
	DefaultStartTimeout = 3 * time.Minute
	// DefaultStopGracePeriod is how long a component may take to exit after
	// SIGTERM before its process group is killed. Components exit in about a
	// second when stopped in order; a kube-apiserver restarted while clients
	// hold watches open waits for them until it is killed, so this is also the
	// floor of Restart(APIServer).
	DefaultStopGracePeriod = 5 * time.Second
	// DefaultServiceClusterIPRange is the Service IP range; the API server's
	// "kubernetes" Service gets its first address.
	DefaultServiceClusterIPRange = "10.96.0.0/16"
	// DefaultPodCIDR is the range kwok hands out Pod IPs from.
	DefaultPodCIDR = "10.244.0.0/16"
)

// Options configure Start. The zero value is valid: every field documents its
// default.
type Options struct {
	// BinDir is the directory holding the localcluster binary and its symlinks
	// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok).
	// Default: $KUBEPLUG_LOCALCLUSTER_BIN, else <repo root>/_output/localcluster/bin,
	// where the repo root is the nearest parent of the working directory (or of
	// this source file) whose go.mod declares module github.com/kubeplug/kubeplug.
	BinDir string

	// DataDir holds etcd's data, certificates, the kubeconfig and component logs
	// (logs/<component>.log). If it already holds a cluster, the cluster's
	// certificates and data are reused. Default: a fresh temporary directory that
	// Stop removes (unless KeepDataDir).
	DataDir string

	// KeepDataDir keeps a temporary DataDir after Stop, for post-mortems.
	// Default: false. A DataDir given by the caller is never removed.
	KeepDataDir bool

	// APIServerFlags are kube-apiserver flags, by name without the leading
	// dashes. A name that the control plane also sets replaces its value; other
	// names are appended. Flags are passed in sorted order. Default: none.
	APIServerFlags map[string]string

	// ControllerManagerFlags and SchedulerFlags work like APIServerFlags for
	// kube-controller-manager and kube-scheduler. Default: none.
	ControllerManagerFlags map[string]string
	SchedulerFlags         map[string]string

	// FeatureGates are passed as --feature-gates to kube-apiserver,
	// kube-controller-manager and kube-scheduler, in sorted order. A
	// "feature-gates" entry in a component's flag map takes precedence.
	// Default: none (the release defaults).
	FeatureGates map[string]bool

	// EtcdFsync makes etcd fsync its writes. Default: false — a throw-away
	// cluster does not need crash safety and fsync dominates write latency.
	EtcdFsync bool

	// StartTimeout bounds Start if ctx has no earlier deadline.
	// Default: DefaultStartTimeout.
	StartTimeout time.Duration

	// StopGracePeriod is how long each component gets to exit after SIGTERM.
	// Default: DefaultStopGracePeriod.
	StopGracePeriod time.Duration

	// Detach starts the components so that they outlive the calling process:
	// each in a session of its own, without a parent-death signal, with pids,
	// ports and command lines recorded in DataDir/state.json (see StateVersion)
	// so that Attach can reconnect from another process and Stop or
	// StopDetached end them. Requires DataDir, which Stop then keeps. Start
	// fails with ErrRunning when DataDir's control plane already runs.
	// Default: false — components die with the caller.
	Detach bool

	// APIServerPort is the API server's port on 127.0.0.1. A port in use is an
	// error wrapping ErrPortInUse that names the port and, when it can tell,
	// the process holding it. Default: the port recorded in DataDir/state.json
	// by an earlier detached Start (so kubeconfigs stay valid), else a free port.
	// The other components reuse their recorded ports when free, else take free
	// ones.
	APIServerPort int

	// ContextName names the cluster, user and context in the kubeconfig.
	// Default: "kubeplug-local".
	ContextName string

	// Logger receives the control plane's own progress messages (component
	// started, ready, stopped), never the components' output, which goes to
	// DataDir/logs. Default: a logger that discards everything.
	Logger *slog.Logger
}

// withDefaults returns a copy of o with every zero field set to its default and
// the maps copied, so that the caller may reuse or change its Options.
func (o Options) withDefaults() (Options, error) {
	if o.StartTimeout < 0 || o.StopGracePeriod < 0 {
		return o, fmt.Errorf("validate options: negative timeout (start %s, stop grace %s)", o.StartTimeout, o.StopGracePeriod)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopGracePeriod == 0 {
		o.StopGracePeriod = DefaultStopGracePeriod
	}
	if o.APIServerPort < 0 || o.APIServerPort > 65535 {
		return o, fmt.Errorf("validate options: API server port %d out of range 1-65535", o.APIServerPort)
	}
	if o.Detach && o.DataDir == "" {
		return o, fmt.Errorf("validate options: a detached control plane needs a DataDir")
	}
	if o.ContextName == "" {
		o.ContextName = "kubeplug-local"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.APIServerFlags = maps.Clone(o.APIServerFlags)
	o.ControllerManagerFlags = maps.Clone(o.ControllerManagerFlags)
	o.SchedulerFlags = maps.Clone(o.SchedulerFlags)
	o.FeatureGates = maps.Clone(o.FeatureGates)
	return o, nil
}

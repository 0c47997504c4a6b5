package hosts

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// field is the path of spec.provider.hosts in cluster.yaml, for errors.
const field = "spec.provider.hosts"

// Host is one host of a pool with its SSH settings resolved (the host's own
// over spec.provider.hosts.ssh over the defaults).
type Host struct {
	// Node is the node's name, <pool>-<index>.
	Node, Pool string
	// Field is the host's path in cluster.yaml, for errors.
	Field string
	// Address is the host's address (no port).
	Address string
	Port    int
	User    string
	KeyFile string
	Agent   bool
	// Jump is the bastion, nil for none.
	Jump *Jump
	// timeouts are the provider's (zero: the defaults).
	timeouts timeouts
	// keySecret is a private key in a Secret of the management cluster
	// (keySecretRef); key is its content, once read.
	keySecret *v1alpha1.SecretKeyRef
	key       []byte
}

// timeouts bound the provider's steps (spec.provider.hosts.timeouts).
type timeouts struct {
	// connect bounds a TCP connect and an SSH handshake; command each
	// command on a host (an upload of the largest node program included);
	// ready the wait for the API server, a Node's Ready and the control
	// plane's static Pods; drain a Node's drain.
	connect, command, ready, drain time.Duration
}

// defaultTimeouts are the timeouts a spec leaves unset.
var defaultTimeouts = timeouts{connect: 15 * time.Second, command: 5 * time.Minute, ready: 4 * time.Minute, drain: 3 * time.Minute}

func (h *Host) connectTimeout() time.Duration {
	if h.timeouts.connect > 0 {
		return h.timeouts.connect
	}
	return defaultTimeouts.connect
}

func (h *Host) commandTimeout() time.Duration {
	if h.timeouts.command > 0 {
		return h.timeouts.command
	}
	return defaultTimeouts.command
}

// Jump is a bastion host.
type Jump struct {
	Address string
	Port    int
	User    string
}

// Addr is host:port.
func (h *Host) Addr() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

// problem is one rule of spec.provider.hosts broken, at its field path.
type problem struct{ path, msg string }

// hostsOf checks spec and resolves its hosts, in pool order. Each error names
// the field of cluster.yaml it is about; all of them are returned together.
// (The cluster file's check reports the same rules at their line: checkSpec.)
func hostsOf(spec *v1alpha1.HostsProvider) ([]*Host, error) {
	hosts, _, probs := resolveHosts(spec, true)
	if err := problemsErr(probs); err != nil {
		return nil, err
	}
	return hosts, nil
}

// problemsErr joins probs, each as "field: message".
func problemsErr(probs []problem) error {
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = fmt.Errorf("%s: %s", p.path, p.msg)
	}
	return errors.Join(errs...)
}

// checkSpec is the hosts provider's rules of a cluster's spec beyond the
// schema, reported by the cluster file's check at their line: fixed pools,
// and spec.provider.hosts' own (resolveHosts) but one: a host without a key
// is the factory's to refuse, since whoever runs up may give the key beside
// the file (a ManagedCluster's sshKeySecret).
func checkSpec(spec *v1alpha1.ClusterSpec) []config.ProviderProblem {
	out := provider.FixedPools(Name, spec)
	if spec.Provider == nil || spec.Provider.Hosts == nil {
		return out
	}
	_, _, probs := resolveHosts(spec.Provider.Hosts, false)
	for _, p := range probs {
		out = append(out, config.ProviderProblem{Pointer: pointerOf(p.path), Message: p.msg})
	}
	return out
}

// pointerOf is the JSON pointer below spec of a field path
// (spec.provider.hosts.pools[1].name → /provider/hosts/pools/1/name).
func pointerOf(path string) string {
	path = strings.TrimPrefix(path, "spec")
	path = strings.NewReplacer("[", ".", "]", "").Replace(path)
	return strings.ReplaceAll(path, ".", "/")
}

// resolveHosts checks spec and resolves its hosts (in pool order) and
// timeouts; each problem names its field. needKey refuses a host with no SSH
// key.
func resolveHosts(spec *v1alpha1.HostsProvider, needKey bool) ([]*Host, timeouts, []problem) {
	if spec == nil {
		return nil, defaultTimeouts, []problem{{field, "missing"}}
	}
	var probs []problem
	bad := func(path, format string, a ...any) {
		probs = append(probs, problem{path, fmt.Sprintf(format, a...)})
	}
	if spec.SSH != nil {
		checkSSH(field+".ssh", spec.SSH, needKey, bad)
	}
	t := timeoutsOf(spec.Timeouts, bad)
	if len(spec.Pools) == 0 {
		bad(field+".pools", "lists no pool: name the cluster's pools and their hosts")
	}
	var out []*Host
	seenPool := map[string]string{}
	seenAddr := map[string]string{}
	for i, p := range spec.Pools {
		out = append(out, resolvePool(spec, i, p, t, seenPool, seenAddr, needKey, bad)...)
	}
	return out, t, probs
}

// resolvePool checks pool i of spec and resolves its hosts; seenPool and
// seenAddr are the pools and addresses of the pools before it.
func resolvePool(spec *v1alpha1.HostsProvider, i int, p v1alpha1.HostPool, t timeouts, seenPool, seenAddr map[string]string, needKey bool, bad func(path, format string, a ...any)) []*Host {
	pf := fmt.Sprintf("%s.pools[%d]", field, i)
	switch {
	case p.Name == "":
		bad(pf+".name", "empty: name a node pool of spec.nodePools, or %s", model.ControlPlanePool)
	case seenPool[p.Name] != "":
		bad(pf+".name", "pool %s is already listed at %s", p.Name, seenPool[p.Name])
	default:
		seenPool[p.Name] = pf
	}
	if len(p.Hosts) == 0 {
		bad(pf+".hosts", "lists no host")
	}
	if p.Name == model.ControlPlanePool && len(p.Hosts) > 1 {
		bad(pf+".hosts", "%d hosts: the control plane runs on one host (more, with stacked etcd, is not built)", len(p.Hosts))
	}
	var out []*Host
	for j, h := range p.Hosts {
		hf := fmt.Sprintf("%s.hosts[%d]", pf, j)
		if h.Address == "" || strings.ContainsAny(h.Address, " /@") || strings.Contains(strings.Trim(h.Address, "[]"), "]") {
			bad(hf+".address", "%q is not an IP address or host name", h.Address)
		} else if prev := seenAddr[h.Address]; prev != "" {
			bad(hf+".address", "%s is already the host at %s", h.Address, prev)
		} else {
			seenAddr[h.Address] = hf
		}
		if h.SSH != nil {
			checkSSH(hf+".ssh", h.SSH, needKey, bad)
		}
		r := resolve(spec.SSH, h.SSH)
		r.Node, r.Pool, r.Field, r.Address = fmt.Sprintf("%s-%d", p.Name, j), p.Name, hf, strings.Trim(h.Address, "[]")
		r.timeouts = t
		if needKey && r.KeyFile == "" && !r.Agent && r.keySecret == nil {
			bad(hf+".ssh", "no key: set keyFile, agent: true or keySecretRef (here or in %s.ssh)", field)
		}
		out = append(out, r)
	}
	return out
}

// timeoutsOf reads spec.provider.hosts.timeouts over the defaults; each must
// be a positive Go duration.
func timeoutsOf(spec *v1alpha1.HostTimeouts, bad func(path, format string, a ...any)) timeouts {
	t := defaultTimeouts
	if spec == nil {
		return t
	}
	for _, f := range []struct {
		name, v string
		to      *time.Duration
	}{{"connect", spec.Connect, &t.connect}, {"command", spec.Command, &t.command}, {"ready", spec.Ready, &t.ready}, {"drain", spec.Drain, &t.drain}} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d <= 0 {
			bad(field+".timeouts."+f.name, "%q is not a positive duration (such as 90s or 5m)", f.v)
			continue
		}
		*f.to = d
	}
	return t
}

// checkSSH checks the settings of one ssh block; statKey also checks that its
// key file is there (on the machine that runs up, so not in the cluster
// file's own check: a ManagedCluster's controller has other files).
func checkSSH(path string, s *v1alpha1.HostSSH, statKey bool, bad func(path, format string, a ...any)) {
	if s.Port < 0 || s.Port > 65535 {
		bad(path+".port", "%d is not a port", s.Port)
	}
	if s.User != "" && strings.ContainsAny(s.User, " @:/") {
		bad(path+".user", "%q is not a user name", s.User)
	}
	if s.KeyFile != "" && statKey {
		if _, err := os.Stat(expandHome(s.KeyFile)); err != nil {
			bad(path+".keyFile", "%v", err)
		}
	}
	if s.Jump != "" {
		if _, err := parseJump(s.Jump); err != nil {
			bad(path+".jump", "%v", err)
		}
	}
	if r := s.KeySecretRef; r != nil {
		for _, f := range []struct{ name, v string }{{"namespace", r.Namespace}, {"name", r.Name}, {"key", r.Key}} {
			if f.v == "" {
				bad(path+".keySecretRef."+f.name, "empty: name the Secret's %s", f.name)
			}
		}
	}
}

// resolve merges a host's ssh settings over the defaults.
func resolve(def, own *v1alpha1.HostSSH) *Host {
	h := &Host{Port: 22, User: "root"}
	for _, s := range []*v1alpha1.HostSSH{def, own} {
		if s == nil {
			continue
		}
		if s.Port != 0 {
			h.Port = s.Port
		}
		if s.User != "" {
			h.User = s.User
		}
		if s.KeyFile != "" {
			h.KeyFile = expandHome(s.KeyFile)
		}
		if s.Agent {
			h.Agent = true
		}
		if s.KeySecretRef != nil {
			h.keySecret = s.KeySecretRef
		}
		if s.Jump != "" {
			h.Jump, _ = parseJump(s.Jump)
		}
	}
	if h.Jump != nil && h.Jump.User == "" {
		h.Jump.User = h.User
	}
	return h
}

// parseJump reads [user@]host[:port].
func parseJump(s string) (*Jump, error) {
	j := &Jump{Port: 22}
	rest := s
	if u, r, ok := strings.Cut(s, "@"); ok {
		if u == "" {
			return nil, fmt.Errorf("%q: empty user before @", s)
		}
		j.User, rest = u, r
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		host = rest
	} else {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a port", s, port)
		}
		j.Port = p
	}
	if host == "" || strings.ContainsAny(host, " /@") {
		return nil, fmt.Errorf("%q is not [user@]host[:port]", s)
	}
	j.Address = host
	return j, nil
}

// expandHome turns a leading ~/ into the user's home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// knownHostsFile is the known_hosts file of spec, ~/.ssh/known_hosts by default.
func knownHostsFile(spec *v1alpha1.HostsProvider) (string, error) {
	if spec != nil && spec.KnownHostsFile != "" {
		return expandHome(spec.KnownHostsFile), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s.knownHostsFile: unset, and no home directory for ~/.ssh/known_hosts: %w", field, err)
	}
	return filepath.Join(home, ".ssh", "known_hosts"), nil
}

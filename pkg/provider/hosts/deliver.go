package hosts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// A bootFile is a file the provider delivers to a host: one of the pool's
// rendered write_files, one of the node's programs, or a unit of its own.
type bootFile struct {
	Path  string `json:"path"`
	Mode  uint32 `json:"mode"`
	Owner string `json:"owner,omitempty"`
	// SHA256 is the hex digest of the content.
	SHA256 string `json:"sha256"`
	// content is the bytes, or src the local file that holds them.
	content []byte
	src     string
}

func (f *bootFile) open() (io.ReadCloser, error) {
	if f.src != "" {
		return os.Open(f.src)
	}
	return io.NopCloser(bytes.NewReader(f.content)), nil
}

// bootScript is what a pool's rendered cloud-init file asks of a host: its
// write_files and its runcmd, in order.
type bootScript struct {
	Files  []*bootFile
	Runcmd [][]string
}

// parseCloudConfig reads a rendered #cloud-config. The provider interprets
// write_files (path, permissions, owner, encoding b64 or none, content) and
// runcmd (each an argv list) — what render writes; any other key or setting
// is refused, naming it, rather than ignored.
func parseCloudConfig(name string, b []byte) (*bootScript, error) {
	if !bytes.HasPrefix(b, []byte("#cloud-config\n")) {
		return nil, fmt.Errorf("%s: not a #cloud-config file", name)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for k := range raw {
		if k != "write_files" && k != "runcmd" {
			return nil, fmt.Errorf("%s: key %s: the hosts provider applies only write_files and runcmd", name, k)
		}
	}
	var cc struct {
		WriteFiles []map[string]yaml.Node `yaml:"write_files"`
		Runcmd     [][]string             `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(b, &cc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &bootScript{Runcmd: cc.Runcmd}
	for i, wf := range cc.WriteFiles {
		f, err := writeFile(fmt.Sprintf("%s: write_files[%d]", name, i), wf)
		if err != nil {
			return nil, err
		}
		s.Files = append(s.Files, f)
	}
	return s, nil
}

// writeFile is one write_files entry (at names it in errors): a clean
// absolute path, octal permissions (default 0644), content plain or base64,
// an owner without shell syntax. Any other setting is refused by name:
// cloud-init's source (a file the host would download) among them.
func writeFile(at string, raw map[string]yaml.Node) (*bootFile, error) {
	wf := map[string]string{}
	for _, k := range slices.Sorted(mapKeys(raw)) {
		if !slices.Contains([]string{"path", "permissions", "owner", "encoding", "content"}, k) {
			return nil, fmt.Errorf("%s: %s is not applied by the hosts provider", at, k)
		}
		v := raw[k]
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: %s is not a string", at, k)
		}
		wf[k] = v.Value
	}
	p := wf["path"]
	if !path.IsAbs(p) || path.Clean(p) != p {
		return nil, fmt.Errorf("%s: path %q is not a clean absolute path", at, p)
	}
	mode := uint64(0o644)
	if wf["permissions"] != "" {
		m, err := strconv.ParseUint(wf["permissions"], 8, 32)
		if err != nil || m > 0o7777 {
			return nil, fmt.Errorf("%s (%s): permissions %q", at, p, wf["permissions"])
		}
		mode = m
	}
	content := []byte(wf["content"])
	switch wf["encoding"] {
	case "":
	case "b64", "base64":
		d, err := base64.StdEncoding.DecodeString(wf["content"])
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", at, p, err)
		}
		content = d
	default:
		return nil, fmt.Errorf("%s (%s): encoding %q is not applied by the hosts provider", at, p, wf["encoding"])
	}
	if o := wf["owner"]; o != "" && strings.ContainsAny(o, " '\"\\$`;") {
		return nil, fmt.Errorf("%s (%s): owner %q", at, p, o)
	}
	return memFile(p, uint32(mode), wf["owner"], content), nil
}

func memFile(p string, mode uint32, owner string, content []byte) *bootFile {
	sum := sha256.Sum256(content)
	return &bootFile{Path: p, Mode: mode, Owner: owner, SHA256: hex.EncodeToString(sum[:]), content: content}
}

// fileOf is a local file delivered to p.
func fileOf(src, p string, mode uint32) (*bootFile, error) {
	f, err := os.Open(src) //nolint:gosec // the node's programs
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return &bootFile{Path: p, Mode: mode, SHA256: hex.EncodeToString(h.Sum(nil)), src: src}, nil
}

//go:embed files
var unitFiles embed.FS

// The host's paths of what the provider installs besides the rendered files:
// the machine image's node layer (images/machine), laid on a host.
const (
	localclusterPath = "/usr/local/lib/kubeplug/kubeplug-localcluster"
	// stateDir on the host holds the list of delivered files (for down and
	// for a re-run).
	hostStateDir = "/var/lib/kubeplug/hosts"
	manifestPath = hostStateDir + "/delivered.json"
)

// links are symlinks the provider makes on a host: the kubelet and
// kube-proxy are the one localcluster program.
var links = map[string]string{"/usr/bin/kubelet": localclusterPath, "/usr/bin/kube-proxy": localclusterPath}

// NodeAgentEnv names the kubeplug binary the hosts get as their node agent
// (Programs.NodeAgent).
const NodeAgentEnv = "KUBEPLUG_NODE_AGENT"

// Programs are the local files of the node programs a host gets.
type Programs struct {
	// NodeAgent is kubeplug itself (a static Linux binary): the node agent
	// kubeplug-boot.service runs. Default: $KUBEPLUG_NODE_AGENT, else this
	// program.
	NodeAgent string
	// LocalnodeBin holds containerd and containerd-shim-runc-v2 (make
	// localnode). Default $KUBEPLUG_LOCALNODE_BIN.
	LocalnodeBin string
	// LocalclusterBin holds kubeplug-localcluster, which runs as the kubelet
	// and kube-proxy (make localcluster). Default $KUBEPLUG_LOCALCLUSTER_BIN.
	// The cluster's spec.kubernetesVersion replaces it with the directory of
	// its version among it and KubernetesBins (CheckKubernetesVersion).
	LocalclusterBin string
	// KubernetesBins are directories of kubeplug-localcluster of other
	// Kubernetes versions (up's --kubernetes-bin), each one's version read
	// from its kube-apiserver.
	KubernetesBins []string
}

func (p Programs) withDefaults() (Programs, error) {
	if p.NodeAgent == "" {
		p.NodeAgent = os.Getenv(NodeAgentEnv)
	}
	if p.NodeAgent == "" {
		exe, err := os.Executable()
		if err != nil {
			return p, err
		}
		p.NodeAgent = exe
	}
	if p.LocalnodeBin == "" {
		p.LocalnodeBin = os.Getenv("KUBEPLUG_LOCALNODE_BIN")
	}
	if p.LocalclusterBin == "" {
		p.LocalclusterBin = os.Getenv("KUBEPLUG_LOCALCLUSTER_BIN")
	}
	if p.LocalnodeBin == "" || p.LocalclusterBin == "" {
		return p, fmt.Errorf("the hosts' node programs: set KUBEPLUG_LOCALNODE_BIN (make localnode) and KUBEPLUG_LOCALCLUSTER_BIN (make localcluster)")
	}
	return p, nil
}

// programFiles are the node programs and the provider's units and
// containerd configuration.
func programFiles(progs Programs) ([]*bootFile, error) {
	progs, err := progs.withDefaults()
	if err != nil {
		return nil, err
	}
	lc, err := filepath.EvalSymlinks(filepath.Join(progs.LocalclusterBin, "kubeplug-localcluster"))
	if err != nil {
		return nil, err
	}
	var out []*bootFile
	for _, p := range []struct{ src, dst string }{
		{progs.NodeAgent, "/usr/local/bin/kubeplug"},
		{filepath.Join(progs.LocalnodeBin, "containerd"), "/usr/local/bin/containerd"},
		{filepath.Join(progs.LocalnodeBin, "containerd-shim-runc-v2"), "/usr/local/bin/containerd-shim-runc-v2"},
		{lc, localclusterPath},
	} {
		f, err := fileOf(p.src, p.dst, 0o755)
		if err != nil {
			return nil, fmt.Errorf("node program: %w", err)
		}
		out = append(out, f)
	}
	for name, dst := range map[string]string{
		"containerd.service":     "/etc/systemd/system/containerd.service",
		"kubelet.service":        "/etc/systemd/system/kubelet.service",
		"kube-proxy.service":     "/etc/systemd/system/kube-proxy.service",
		"containerd-config.toml": "/etc/containerd/config.toml",
	} {
		b, err := unitFiles.ReadFile("files/" + name)
		if err != nil {
			return nil, err
		}
		out = append(out, memFile(dst, 0o644, "root:root", b))
	}
	slices.SortFunc(out, func(a, b *bootFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// digests asks the host for the SHA-256 of each path; a missing file has
// none.
func (c *client) digests(ctx context.Context, paths []string) (map[string]string, error) {
	var b strings.Builder
	b.WriteString("for f in")
	for _, p := range paths {
		b.WriteString(" " + shellQuote(p))
	}
	b.WriteString("; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && sha256sum \"$f\"; done; true")
	out, err := c.run(ctx, "digests of the delivered files", b.String(), nil)
	if err != nil {
		return nil, err
	}
	have := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if sum, p, ok := strings.Cut(line, "  "); ok {
			have[p] = sum
		}
	}
	return have, nil
}

// uploadAttempts is how often an upload whose digest on the host is wrong
// (a dropped connection, a full disk) is tried.
const uploadAttempts = 3

// upload writes f on the host through a temporary file, checks its digest
// there, then renames it into place.
func (c *client) upload(ctx context.Context, f *bootFile) error {
	var last error
	for range uploadAttempts {
		r, err := f.open()
		if err != nil {
			return err
		}
		tmp := f.Path + ".kubeplug-tmp"
		var out string
		if c.host.User == "root" {
			script := fmt.Sprintf("set -e; umask 022; mkdir -p %s; umask 077; cat > %s; sha256sum %s",
				shellQuote(path.Dir(f.Path)), shellQuote(tmp), shellQuote(tmp))
			out, err = c.run(ctx, "upload "+f.Path, script, r)
		} else {
			// As the user to a file of its own, then copied into place as
			// root: only the user's own command reads the stream.
			var up string
			up, err = c.exec(ctx, "upload "+f.Path, "set -e; umask 077; t=$(mktemp /var/tmp/kubeplug-upload.XXXXXX); cat > \"$t\"; echo \"$t\"", r, false)
			up = strings.TrimSpace(up)
			if err == nil {
				script := fmt.Sprintf("set -e; umask 022; mkdir -p %s; umask 077; cat %s > %s; rm -f %s; sha256sum %s",
					shellQuote(path.Dir(f.Path)), shellQuote(up), shellQuote(tmp), shellQuote(up), shellQuote(tmp))
				out, err = c.run(ctx, "install "+f.Path, script, nil)
			}
		}
		_ = r.Close()
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		if got, _, _ := strings.Cut(strings.TrimSpace(out), " "); got != f.SHA256 {
			last = fmt.Errorf("%s: upload %s: sha256 on the host is %s, want %s", label(c.host), f.Path, got, f.SHA256)
			continue
		}
		owner := f.Owner
		if owner == "" {
			owner = "root:root"
		}
		script := fmt.Sprintf("set -e; chown %s %s; chmod %04o %s; mv -f %s %s",
			shellQuote(owner), shellQuote(tmp), f.Mode, shellQuote(tmp), shellQuote(tmp), shellQuote(f.Path))
		if _, err := c.run(ctx, "install "+f.Path, script, nil); err != nil {
			return err
		}
		return nil
	}
	return last
}

// deliver brings the host's files to files: it asks for their digests and
// uploads those that differ (each verified on the host). It returns how many
// it uploaded; zero means the host already had every byte. With record, it
// also writes the delivered list (a roll writes it once the host is Ready).
func (c *client) deliver(ctx context.Context, files []*bootFile, record bool, progress func(string)) (int, error) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	have, err := c.digests(ctx, append(paths, manifestPath))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if have[f.Path] == f.SHA256 {
			continue
		}
		progress("upload " + f.Path)
		if err := c.upload(ctx, f); err != nil {
			return n, err
		}
		n++
	}
	var linkScript strings.Builder
	linkScript.WriteString("set -e")
	for _, l := range slices.Sorted(mapKeys(links)) {
		fmt.Fprintf(&linkScript, "; [ \"$(readlink %s)\" = %s ] || ln -sfn %s %s", shellQuote(l), shellQuote(links[l]), shellQuote(links[l]), shellQuote(l))
	}
	if _, err := c.run(ctx, "links", linkScript.String(), nil); err != nil {
		return n, err
	}
	if record {
		return n, c.writeDeliveredIf(ctx, files, have[manifestPath])
	}
	return n, nil
}

// writeDelivered writes the list of the files delivered to the host.
func (c *client) writeDelivered(ctx context.Context, files []*bootFile) error {
	return c.writeDeliveredIf(ctx, files, "")
}

// writeDeliveredIf writes the delivered list unless the host's has the
// digest have.
func (c *client) writeDeliveredIf(ctx context.Context, files []*bootFile, have string) error {
	manifest, err := json.Marshal(files)
	if err != nil {
		return err
	}
	mf := memFile(manifestPath, 0o600, "root:root", manifest)
	if have == mf.SHA256 {
		return nil
	}
	return c.upload(ctx, mf)
}

func mapKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// runcmd runs the boot script's commands in order, as cloud-init's runcmd
// does (a failed line does not stop the next), and fails naming each line
// that failed.
func (c *client) runcmd(ctx context.Context, cmds [][]string) error {
	var failed []string
	for _, argv := range cmds {
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = shellQuote(a)
		}
		line := strings.Join(quoted, " ")
		if _, err := c.run(ctx, "runcmd "+strings.Join(argv, " "), line, nil); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "\n"))
	}
	return nil
}

package boot

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// Where the hooks and the stand-in kubelet record what happened, on the machine.
const (
	traceDir       = "/var/lib/boot-test"
	kubeletStarted = "/var/lib/kubelet-standin/started"
	kubeletArgs    = "/var/lib/kubelet-standin/args"
)

// A scenario is one pool's hooks and what its boot must show.
type scenario struct {
	name  string
	hooks []model.Hook
	// after runs in the namespace once the boot ended, as a shell script.
	after string
	check func(t *testing.T, m *machine)
}

// TestBootHonoursBehaviours boots a machine from each node format's rendered files
// and checks each behaviour by what ran, and when.
func TestBootHonoursBehaviours(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("booting a machine in a private mount and pid namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is not installed: %v", err)
	}
	// Unique, so that the test can look for leftovers of its own processes.
	token := strconv.Itoa(500000 + os.Getpid()%100000)
	sh := func(s string) []string { return []string{"sh", "-c", s} }
	stamp := func(name string) string { return "date +%s.%N > " + traceDir + "/" + name }

	scenarios := []scenario{{
		// sync-bypass failures and timeouts are reported and the boot goes on; an
		// async hook runs alongside the kubelet without holding the phase, and the boot
		// ends only once it has; afterNodeup runs once the kubelet started; afterDeploy
		// runs when the deploy writes the trigger.
		name: "behaviours hold",
		hooks: []model.Hook{
			{Name: "prep", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorSyncEnforce, Script: "#!/bin/sh\nset -e\nmkdir -p " + traceDir + "\n" + stamp("prep") + "\n"},
			{Name: "slow", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorAsyncBypass, Command: sh(stamp("slow.start") + "; sleep 5; " + stamp("slow.end"))},
			{Name: "flaky", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorSyncBypass, Command: sh("echo flaky >&2; exit 3")},
			{Name: "hang", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorSyncBypass, Timeout: "1s", Command: sh("sleep " + token + "1; " + stamp("hang.end"))},
			{Name: "joined", At: render.PhaseAfterNodeup, Behavior: hookspec.BehaviorSyncEnforce, Command: sh(waitFor(kubeletStarted) + " && " + stamp("joined"))},
			{Name: "deployed", At: render.PhaseAfterDeploy, Behavior: hookspec.BehaviorSyncEnforce, Command: sh(stamp("deployed"))},
		},
		after: "date > " + hookspec.AfterDeployTriggerPath + " && systemctl start kubeplug-after-deploy.service",
		check: func(t *testing.T, m *machine) {
			m.noMarker(t)
			kubelet := m.time(t, kubeletStarted)
			slowStart, slowEnd := m.time(t, traceDir+"/slow.start"), m.time(t, traceDir+"/slow.end")
			if slowStart.After(kubelet) {
				t.Errorf("the async hook started after the kubelet (%s > %s)", slowStart, kubelet)
			}
			// Order, not durations: a loaded machine stretches every step, but an
			// async hook that held the phase would end before the kubelet started.
			if !kubelet.Before(slowEnd) {
				t.Errorf("the kubelet started (%s) only after the async hook ended (%s): the async hook held the phase", kubelet, slowEnd)
			}
			t.Logf("the kubelet started %s after the boot began; the 5s async hook ended %s after that; the boot ended %s after it began",
				kubelet.Sub(m.t0).Round(time.Millisecond), slowEnd.Sub(kubelet).Round(time.Millisecond), m.end.Sub(m.t0).Round(time.Millisecond))
			if m.end.Before(slowEnd) {
				t.Errorf("the boot ended (%s) before its async hook (%s)", m.end, slowEnd)
			}
			if joined := m.time(t, traceDir+"/joined"); joined.Before(kubelet) {
				t.Errorf("afterNodeup ran before the kubelet started")
			}
			if m.exists(traceDir + "/hang.end") {
				t.Error("the hook that hung past its timeout was not killed")
			}
			m.time(t, traceDir+"/prep")
			m.time(t, traceDir+"/deployed")
			rep := m.report(t, render.PhaseBeforeNodeup)
			want := map[string]nodeagent.Status{"prep": nodeagent.StatusSucceeded, "slow": nodeagent.StatusSucceeded, "flaky": nodeagent.StatusFailed, "hang": nodeagent.StatusTimedOut}
			for _, h := range rep.Hooks {
				if want[h.Name] != h.Status {
					t.Errorf("beforeNodeup hook %s: %s (%s), want %s", h.Name, h.Status, h.Reason, want[h.Name])
				}
			}
			if args := m.read(t, kubeletArgs); !strings.Contains(args, "--max-pods=42") {
				t.Errorf("the kubelet ran without its flags from %s: %q", render.KubeletEnvPath, args)
			}
		},
	}, {
		// A failed sync-enforce hook stops the boot before the kubelet: no later hook
		// runs, the marker says why, and the kubelet stays down when started later.
		name: "enforced failure stops the boot",
		hooks: []model.Hook{
			{Name: "install", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorSyncEnforce, Script: "#!/bin/sh\necho disk full >&2\nexit 1\n"},
			{Name: "next", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorSyncBypass, Command: sh("mkdir -p " + traceDir + " && " + stamp("next"))},
			{Name: "joined", At: render.PhaseAfterNodeup, Behavior: hookspec.BehaviorSyncBypass, Command: sh("mkdir -p " + traceDir + " && " + stamp("joined"))},
		},
		after: "systemctl start kubelet.service",
		check: func(t *testing.T, m *machine) {
			marker := m.read(t, hookspec.FailedMarkerPath)
			if !strings.Contains(marker, "hook install of plugin demo failed in phase beforeNodeup") {
				t.Errorf("%s does not name the failed hook: %q", hookspec.FailedMarkerPath, marker)
			}
			for _, p := range []string{kubeletStarted, traceDir + "/next", traceDir + "/joined"} {
				if m.exists(p) {
					t.Errorf("%s exists: it ran after the enforced failure", p)
				}
			}
			if out := m.read(t, "/var/log/standin/units/kubeplug-boot.service.log"); !strings.Contains(out, "hook install of plugin demo failed") {
				t.Errorf("the boot's console output does not say why the node failed:\n%s", out)
			}
			if log := m.read(t, systemctlLog); !strings.Contains(log, "kubelet.service: condition ConditionPathExists=!"+hookspec.FailedMarkerPath+" unmet") {
				t.Errorf("starting the kubelet on the failed node was not refused by its condition:\n%s", log)
			}
		},
	}, {
		// An async-enforce failure does not hold the kubelet but fails the node when it ends.
		name: "async enforced failure fails the node later",
		hooks: []model.Hook{
			{Name: "late", At: render.PhaseBeforeNodeup, Behavior: hookspec.BehaviorAsyncEnforce, Command: sh("mkdir -p " + traceDir + "; sleep 3; " + stamp("late.end") + "; exit 4")},
		},
		check: func(t *testing.T, m *machine) {
			kubelet := m.time(t, kubeletStarted)
			if late := m.time(t, traceDir+"/late.end"); !kubelet.Before(late) {
				t.Errorf("the kubelet started (%s) only after the async hook ended (%s): the async hook held it", kubelet, late)
			}
			if marker := m.read(t, hookspec.FailedMarkerPath); !strings.Contains(marker, "hook late of plugin demo failed") {
				t.Errorf("%s does not name the failed async hook: %q", hookspec.FailedMarkerPath, marker)
			}
		},
	}}

	for _, format := range []string{"cloud-init", "ignition"} {
		for _, sc := range scenarios {
			t.Run(format+"/"+sc.name, func(t *testing.T) {
				files := renderPool(t, sc.hooks)
				m := newMachine(t, token)
				var boot string
				if format == "cloud-init" {
					boot = m.layCloudInit(t, files["nodes/workers/cloud-init.yaml"])
				} else {
					boot = m.layIgnition(t, files["nodes/workers/ignition.json"])
				}
				start := time.Now()
				m.boot(t, unshare, boot, sc.after)
				t.Logf("%s boot took %s", format, time.Since(start).Round(time.Millisecond))
				sc.check(t, m)
				if t.Failed() {
					t.Logf("systemctl log:\n%s", m.readOr(systemctlLog))
					t.Logf("boot output:\n%s", m.readOr("/var/log/standin/units/kubeplug-boot.service.log"))
				}
			})
		}
	}
}

// waitFor is a shell command that waits up to 5s for a file: `systemctl start` of a
// Type=simple unit returns once the process is started, not once it has done anything.
func waitFor(p string) string {
	return "i=0; while [ ! -e " + p + " ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; test -e " + p
}

// renderPool renders a cluster whose pool "workers" has hooks of plugin "demo".
func renderPool(t *testing.T, hooks []model.Hook) map[string][]byte {
	t.Helper()
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
	c := &model.Contribution{Pools: map[string]*model.Pool{"workers": {
		Hooks:   hooks,
		Kubelet: model.Kubelet{Flags: map[string]model.Setting[string]{"max-pods": {Value: "42"}}},
	}}}
	if d := m.Add("demo", c); len(d) > 0 {
		t.Fatalf("adding the hooks: %s", d)
	}
	files, d := render.Files(t.Context(), render.Input{ClusterName: "boot", KubernetesVersion: "1.37.2", Model: m})
	if len(d.Fatal()) > 0 {
		t.Fatalf("render: %s", d)
	}
	return files
}

// machine is a machine's root: overlay upper directories for /etc, /usr and /var
// that the test fills with the rendered files and reads back after the boot.
type machine struct {
	dir   string
	token string
	// t0 and end are when the boot began and ended, on the machine's clock.
	t0, end time.Time
}

var overlaid = []string{"etc", "usr", "var"}

func newMachine(t *testing.T, token string) *machine {
	dir := t.TempDir()
	for _, top := range overlaid {
		if strings.HasPrefix(dir, "/"+top+"/") {
			t.Fatalf("the test's temporary directory %s is under /%s, which the test overlays; set TMPDIR elsewhere", dir, top)
		}
	}
	m := &machine{dir: dir, token: token}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is the node agent and systemctl; the kubelet is a stand-in that
	// records its start and arguments and then lives like a daemon. Its start stamp
	// appears whole (written aside, then renamed): a hook waits for it.
	m.link(t, self, render.AgentPath)
	m.link(t, self, "/usr/bin/systemctl")
	m.write(t, render.KubeletPath, 0o755, "#!/bin/sh\nmkdir -p "+filepath.Dir(kubeletStarted)+"\necho \"$@\" > "+kubeletArgs+"\ndate +%s.%N > "+kubeletStarted+".new && mv "+kubeletStarted+".new "+kubeletStarted+"\nexec sleep "+token+"0\n")
	// The image's kubelet unit, which the rendered drop-in completes.
	m.write(t, "/usr/lib/systemd/system/kubelet.service", 0o644, "[Unit]\nDescription=image's kubelet.service\n\n[Service]\nExecStart=/usr/bin/kubelet\n")
	return m
}

// upper maps a machine path into the overlay upper directory holding it.
func (m *machine) upper(t *testing.T, p string) string {
	t.Helper()
	top, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !slices.Contains(overlaid, top) {
		t.Fatalf("%s is outside the overlaid /%s", p, strings.Join(overlaid, ", /"))
	}
	return filepath.Join(m.dir, "upper", filepath.FromSlash(p))
}

func (m *machine) write(t *testing.T, p string, mode os.FileMode, content string) {
	t.Helper()
	u := m.upper(t, p)
	if err := os.MkdirAll(filepath.Dir(u), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(u, mode); err != nil {
		t.Fatal(err)
	}
}

func (m *machine) link(t *testing.T, target, p string) {
	t.Helper()
	u := m.upper(t, p)
	if err := os.MkdirAll(filepath.Dir(u), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, u); err != nil {
		t.Fatal(err)
	}
}

func (m *machine) exists(p string) bool {
	_, err := os.Stat(filepath.Join(m.dir, "upper", filepath.FromSlash(p)))
	return err == nil
}

func (m *machine) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(m.upper(t, p))
	if err != nil {
		t.Fatalf("on the machine: %v", err)
	}
	return string(b)
}

func (m *machine) readOr(p string) string {
	b, err := os.ReadFile(filepath.Join(m.dir, "upper", filepath.FromSlash(p)))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// time reads a `date +%s.%N` stamp.
func (m *machine) time(t *testing.T, p string) time.Time {
	t.Helper()
	return parseStamp(t, p, m.read(t, p))
}

func parseStamp(t *testing.T, p, s string) time.Time {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatalf("%s: not a time stamp: %q", p, s)
	}
	return time.Unix(0, int64(f*1e9))
}

func (m *machine) noMarker(t *testing.T) {
	t.Helper()
	if m.exists(hookspec.FailedMarkerPath) {
		t.Errorf("the node is marked failed: %s", m.readOr(hookspec.FailedMarkerPath))
	}
}

func (m *machine) report(t *testing.T, phase string) *nodeagent.Report {
	t.Helper()
	var rep nodeagent.Report
	if err := json.Unmarshal([]byte(m.read(t, nodeagent.ReportsDir+"/"+phase+".json")), &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// layCloudInit does what cloud-init's write_files does and returns runcmd's script,
// made by cloud-init's own code (the shellify of the cloud-init this machine has).
func (m *machine) layCloudInit(t *testing.T, b []byte) string {
	t.Helper()
	var cc struct {
		WriteFiles []struct {
			Path        string `yaml:"path"`
			Permissions string `yaml:"permissions"`
			Encoding    string `yaml:"encoding"`
			Content     string `yaml:"content"`
		} `yaml:"write_files"`
		Runcmd []any `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	for _, f := range cc.WriteFiles {
		content := f.Content
		if f.Encoding == "b64" {
			d, err := base64.StdEncoding.DecodeString(content)
			if err != nil {
				t.Fatal(err)
			}
			content = string(d)
		}
		mode, err := strconv.ParseUint(f.Permissions, 8, 32)
		if err != nil {
			t.Fatal(err)
		}
		m.write(t, f.Path, os.FileMode(mode), content)
	}
	for _, c := range cc.Runcmd {
		if argv, ok := c.([]any); ok && slices.Contains(argv, any("kubelet.service")) {
			t.Errorf("runcmd starts the kubelet itself (%v): only the boot may", argv)
		}
	}
	ci, err := exec.LookPath("cloud-init")
	if err != nil {
		t.Fatalf("cloud-init is not installed (run `make validators`): %v", err)
	}
	shebang, err := os.ReadFile(ci) //nolint:gosec // the installed cloud-init
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(shebang, []byte("\n"))
	python := strings.Fields(strings.TrimPrefix(string(line), "#!"))
	cmds, err := json.Marshal(cc.Runcmd)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python[0], append(python[1:], "-c", "import json, sys\nfrom cloudinit import util\nsys.stdout.write(util.shellify(json.load(sys.stdin)))")...) //nolint:gosec // cloud-init's interpreter
	cmd.Stdin = bytes.NewReader(cmds)
	script, err := cmd.Output()
	if err != nil {
		t.Fatalf("cloud-init's shellify of runcmd: %v", err)
	}
	p := filepath.Join(m.dir, "runcmd")
	if err := os.WriteFile(p, script, 0o755); err != nil { //nolint:gosec // a script
		t.Fatal(err)
	}
	return "sh " + p
}

// layIgnition does what Ignition's files and units stages do and returns what systemd
// does at first boot: start the enabled units.
func (m *machine) layIgnition(t *testing.T, b []byte) string {
	t.Helper()
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Mode     int    `json:"mode"`
				Contents struct {
					Source string `json:"source"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
		Systemd struct {
			Units []struct {
				Name     string `json:"name"`
				Enabled  bool   `json:"enabled"`
				Contents string `json:"contents"`
				Dropins  []struct {
					Name     string `json:"name"`
					Contents string `json:"contents"`
				} `json:"dropins"`
			} `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg.Storage.Files {
		d, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f.Contents.Source, "data:;base64,"))
		if err != nil {
			t.Fatal(err)
		}
		m.write(t, f.Path, os.FileMode(f.Mode), string(d))
	}
	var enabled []string
	for _, u := range cfg.Systemd.Units {
		if u.Contents != "" {
			m.write(t, "/etc/systemd/system/"+u.Name, 0o644, u.Contents)
		}
		for _, d := range u.Dropins {
			m.write(t, "/etc/systemd/system/"+u.Name+".d/"+d.Name, 0o644, d.Contents)
		}
		if u.Enabled {
			enabled = append(enabled, u.Name)
		}
	}
	if slices.Contains(enabled, "kubelet.service") {
		t.Errorf("the kubelet is enabled: it would start before the beforeNodeup hooks")
	}
	return "systemctl start " + strings.Join(enabled, " ")
}

// boot runs the boot command in a private mount and pid namespace where the
// machine's directories are overlaid on /etc, /usr and /var, then after. The shell
// is the namespace's init: when it exits, the kernel kills whatever the boot left
// (the kubelet). The test then checks that nothing of it is left on the host.
func (m *machine) boot(t *testing.T, unshare, boot, after string) {
	t.Helper()
	var mounts strings.Builder
	for _, top := range overlaid {
		up, work := filepath.Join(m.dir, "upper", top), filepath.Join(m.dir, "work", top)
		for _, d := range []string{up, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&mounts, "mount -t overlay overlay -o lowerdir=/%s,upperdir=%s,workdir=%s /%s\n", top, up, work, top)
	}
	script := "set -e\n" + mounts.String() +
		"mkdir -p " + traceDir + "\n" +
		"date +%s.%N > " + traceDir + "/t0\n" +
		"rc=0\n" + boot + " || rc=$?\n" +
		"date +%s.%N > " + traceDir + "/end\n" +
		"echo $rc > " + traceDir + "/rc\n" +
		after + "\n"
	ctx := t.Context()
	cmd := exec.CommandContext(ctx, unshare, "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private", "sh", "-c", script) //nolint:gosec // the test's own script
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the boot in its namespace: %v\n%s", err, out)
	}
	m.t0 = m.time(t, traceDir+"/t0")
	m.end = m.time(t, traceDir+"/end")
	m.checkClean(t)
}

// checkClean fails when a process or mount of the boot outlived its namespace.
func (m *machine) checkClean(t *testing.T) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p) //nolint:gosec // /proc
		if err == nil && (bytes.Contains(b, []byte(m.token)) || bytes.Contains(b, []byte(m.dir))) {
			t.Errorf("a process of the boot outlived it: %s: %q", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mounts, []byte(m.dir)) {
		t.Errorf("a mount of the boot is left on the host:\n%s", mounts)
	}
}

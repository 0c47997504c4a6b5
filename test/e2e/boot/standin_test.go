package boot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/cmd"
)

// TestMain lets the test binary play the machine's programs: linked as
// /usr/local/bin/kubeplug it is the real kubeplug command line, linked as
// /usr/bin/systemctl it is the stand-in below.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "kubeplug":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cmd.Main(ctx, os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		stop()
		os.Exit(code)
	case "systemctl":
		os.Exit(systemctl(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// Where the stand-ins leave their traces on the machine.
const (
	systemctlLog = "/var/log/standin/systemctl.log"
	unitLogDir   = "/var/log/standin/units"
)

// systemctl stands in for systemd's. It appends each call to systemctlLog, and for
// `start` and `enable --now` runs each service the way systemd would start it: the
// unit file (/etc/systemd/system, else /usr/lib/systemd/system) merged with its
// drop-ins in name order, an empty ExecStart= resetting the list, every
// ConditionPathExists= checked (a failed condition skips the unit, as systemd does),
// EnvironmentFile= read and $VAR expanded into words. Type=simple services (the
// kubelet) are started and left running, with their output in unitLogDir; exec and
// oneshot ones are waited for, so that runcmd's script ends when the boot does (a
// real `systemctl start` of a Type=exec unit returns at once). Other units (.path)
// are only recorded. The exit status is the first failed service's.
func systemctl(args []string) int {
	logf := func(format string, a ...any) {
		_ = os.MkdirAll(path.Dir(systemctlLog), 0o755)
		f, err := os.OpenFile(systemctlLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(f, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
		_ = f.Close()
	}
	logf("systemctl %s", strings.Join(args, " "))
	var units []string
	switch {
	case len(args) > 0 && args[0] == "start":
		units = args[1:]
	case len(args) > 1 && args[0] == "enable" && args[1] == "--now":
		units = args[2:]
	default:
		return 0
	}
	code := 0
	for _, u := range units {
		if !strings.HasSuffix(u, ".service") {
			continue
		}
		rc := startService(u, logf)
		if rc != 0 && code == 0 {
			code = rc
		}
	}
	return code
}

func startService(name string, logf func(string, ...any)) int {
	files := []string{filepath.Join("/etc/systemd/system", name)}
	if _, err := os.Stat(files[0]); err != nil {
		files[0] = filepath.Join("/usr/lib/systemd/system", name)
	}
	dropIns, _ := filepath.Glob(filepath.Join("/etc/systemd/system", name+".d", "*.conf"))
	slices.Sort(dropIns)
	files = append(files, dropIns...)
	var (
		execStart  []string
		conditions []string
		envFiles   []string
		typ        = "simple"
	)
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the machine's own unit files
		if err != nil {
			logf("%s: %v", name, err)
			return 5
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			if !ok {
				continue
			}
			switch k {
			case "ExecStart":
				if v == "" {
					execStart = nil
				} else {
					execStart = append(execStart, v)
				}
			case "ConditionPathExists":
				conditions = append(conditions, v)
			case "EnvironmentFile":
				envFiles = append(envFiles, v)
			case "Type":
				typ = v
			}
		}
	}
	for _, c := range conditions {
		p, negate := strings.CutPrefix(c, "!")
		_, err := os.Stat(p)
		if exists := err == nil; exists == negate {
			logf("%s: condition ConditionPathExists=%s unmet, skipped", name, c)
			return 0
		}
	}
	env := map[string]string{}
	for _, ef := range envFiles {
		// "-" before the path: a missing file is fine, as systemd has it.
		ef, optional := strings.CutPrefix(ef, "-")
		b, err := os.ReadFile(ef) //nolint:gosec // the machine's own environment file
		if err != nil {
			if optional && errors.Is(err, os.ErrNotExist) {
				continue
			}
			logf("%s: %v", name, err)
			return 1
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				env[strings.TrimSpace(k)] = v
			}
		}
	}
	if err := os.MkdirAll(unitLogDir, 0o755); err != nil {
		return 1
	}
	out, err := os.OpenFile(filepath.Join(unitLogDir, name+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 1
	}
	defer func() { _ = out.Close() }()
	for _, line := range execStart {
		var argv []string
		for _, w := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(w, "$"); ok {
				argv = append(argv, strings.Fields(env[v])...)
				continue
			}
			argv = append(argv, w)
		}
		logf("%s: started (Type=%s): %s", name, typ, strings.Join(argv, " "))
		cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec // the unit's ExecStart
		cmd.Stdout, cmd.Stderr = out, out
		if typ == "simple" {
			// A daemon: systemd would supervise it; here the namespace ends it.
			if err := cmd.Start(); err != nil {
				logf("%s: %v", name, err)
				return 1
			}
			continue
		}
		if err := cmd.Run(); err != nil {
			logf("%s: %v", name, err)
			return 1
		}
		logf("%s: ended", name)
	}
	return 0
}

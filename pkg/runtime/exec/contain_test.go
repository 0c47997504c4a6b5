package exec_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestNoProcessEscapes: what a plugin starts in the background — in its group,
// in a session of its own (setsid), or through a double fork — ends with the
// call, even when the plugin exits successfully.
func TestNoProcessEscapes(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc")
	}
	pids := filepath.Join(t.TempDir(), "pids")
	pkg := script(t, `cat >/dev/null
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! >>"$PIDS"
setsid sh -c 'echo $$ >>"$PIDS"; exec sleep 300' </dev/null >/dev/null 2>&1 &
( ( sleep 300 </dev/null >/dev/null 2>&1 & echo $! >>"$PIDS" ) & )
sleep 0.2
exit 3
`, true)
	rt := newRuntime(t, pkg, exec.Options{Env: []string{"PIDS=" + pids}})
	if _, err := rt.Run(t.Context(), request(stage.Render)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pids)
	must(t, err)
	list := strings.Fields(string(b))
	if len(list) != 3 {
		t.Fatalf("pids %q", list)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, s := range list {
		pid, _ := strconv.Atoi(s)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d outlived the plugin", pid)
		}
	}
}

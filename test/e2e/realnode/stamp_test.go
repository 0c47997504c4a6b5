package realnode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStampWriter: the HA upgrade's up output, stamped line by line (lines
// written in pieces too), and the lines around a gap.
func TestStampWriter(t *testing.T) {
	w := &stampWriter{start: time.Now().Add(-90 * time.Second)}
	_, _ = fmt.Fprint(w, "one\ntw")
	_, _ = fmt.Fprint(w, "o\nthree\n")
	if got, want := w.String(), "+1m30s one\n+1m30s two\n+1m30s three\n"; got != want {
		t.Errorf("stamped %q, want %q", got, want)
	}
	if got := w.around(time.Now(), time.Now()); strings.Count(got, "\n") != 3 || !strings.Contains(got, "+1m30s two\n") {
		t.Errorf("around now: %q", got)
	}
	if got := w.around(time.Now().Add(5*time.Minute), time.Now().Add(6*time.Minute)); got != "" {
		t.Errorf("around later: %q", got)
	}
}

func TestKubeletErrors(t *testing.T) {
	journal := strings.Join([]string{
		`Nov 27 23:14:02.958 cp-0 kubelet[504]: E1127 23:14:02.958847 504 cri_stats_provider.go:533] "Failed to get the info of the filesystem with mountpoint" err="cannot find filesystem info for device"`,
		`Nov 27 23:14:04.529 cp-0 kubelet[504]: I1127 23:14:04.529384 504 server.go:177] "Pod update broadcasted"`,
		`Nov 27 23:14:05.789 cp-0 kubelet[504]: E1127 23:14:05.789462 504 pod_workers.go:1338] "Error syncing pod, skipping" err="CrashLoopBackOff"`,
	}, "\n")
	if got := kubeletErrors(journal, 5); !strings.Contains(got, "Error syncing pod") || strings.Contains(got, "filesystem") || strings.Contains(got, "broadcasted") {
		t.Errorf("kubeletErrors = %q", got)
	}
}

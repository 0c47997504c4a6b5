package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// SummaryEnv names a file each benchmark appends its [perf] targets' rows to
// (target, kubeplug, anchor, ratio, met, CPU: the header the Makefile prints), so that `make bench`, which runs the
// benchmarks one after another, ends with every target side by side with its
// anchor in one table. Unset, nothing is written.
const SummaryEnv = "KUBEPLUG_BENCH_SUMMARY"

// summaryRow is one target in the summary: what it is, kubeplug's figure, its
// anchor's, their ratio, whether the target is met, and the CPU split. Empty
// fields print as "-".
type summaryRow struct {
	target, kubeplug, anchor, ratio, met, cpu string
}

// summarise appends rows to $KUBEPLUG_BENCH_SUMMARY, when set. A file that
// cannot be written fails the benchmark: a summary silently missing rows
// would read as targets not measured.
func summarise(tb testing.TB, rows ...summaryRow) {
	tb.Helper()
	path := os.Getenv(SummaryEnv)
	if path == "" {
		return
	}
	var b strings.Builder
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.target, dash(r.kubeplug), dash(r.anchor), dash(r.ratio), dash(r.met), dash(r.cpu))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatalf("%s: %v", SummaryEnv, err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		tb.Fatalf("%s %s: %v", SummaryEnv, path, err)
	}
	if err := f.Close(); err != nil {
		tb.Fatalf("%s %s: %v", SummaryEnv, path, err)
	}
}

// yesNo is a target's "met" column.
func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func TestSummariseAppendsRows(t *testing.T) {
	path := t.TempDir() + "/summary.md"
	t.Setenv(SummaryEnv, path)
	summarise(t, summaryRow{target: "a ≤ 1 s", kubeplug: "0.50 s", anchor: "0.40 s", ratio: "1.25", met: "yes"})
	summarise(t, summaryRow{target: "b"})
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "| a ≤ 1 s | 0.50 s | 0.40 s | 1.25 | yes | - |\n| b | - | - | - | - | - |\n"
	if string(got) != want {
		t.Errorf("summary file:\n%s\nwant:\n%s", got, want)
	}
}

// summariseApply puts the apply's [perf] targets into the summary at each
// size: a fresh apply at most the bare loop's time, a no-op re-apply at most
// noopTarget, and kubectl's and helm's times beside kubeplug's.
func summariseApply(tb testing.TB, sizes []int, samples map[int][]sample) {
	tb.Helper()
	for _, size := range sizes {
		got := samples[size]
		if len(got) == 0 {
			continue
		}
		m, r := medians(got), ratios(got)
		cpu := func(own, server time.Duration) string {
			return fmt.Sprintf("%.2f, %.2f", own.Seconds(), server.Seconds())
		}
		rows := []summaryRow{
			{
				target:   fmt.Sprintf("fresh apply of %d objects ≤ 1.0× the bare parallel SSA loop", size),
				kubeplug: fmt.Sprintf("%.2f s", m.kubeplug.Seconds()), anchor: fmt.Sprintf("bare loop %.2f s", m.bare.Seconds()),
				ratio: fmt.Sprintf("%.2f", r), met: yesNo(r <= 1.0),
				cpu: cpu(m.kubeplugCPU, m.kubeplugServer) + " (" + cpu(m.bareCPU, m.bareServer) + ")",
			},
			{
				target:   fmt.Sprintf("no-op re-apply of %d objects ≤ %.2f s", size, noopTarget.Seconds()),
				kubeplug: fmt.Sprintf("%.3f s, %d requests", m.noop.Seconds(), m.noopReqs), met: yesNo(m.noop <= noopTarget),
				cpu: fmt.Sprintf("%.2f, -", m.noopCPU.Seconds()),
			},
			{
				target:   fmt.Sprintf("fresh apply of %d objects beside kubectl apply --server-side", size),
				kubeplug: fmt.Sprintf("%.2f s", m.kubeplug.Seconds()), anchor: fmt.Sprintf("kubectl %.2f s", m.kubectl.Seconds()),
				ratio: fmt.Sprintf("%.2f", m.kubeplug.Seconds()/m.kubectl.Seconds()),
			},
		}
		if m.helm > 0 {
			rows = append(rows, summaryRow{
				target:   fmt.Sprintf("fresh apply of %d objects beside helm install ×20", size),
				kubeplug: fmt.Sprintf("%.2f s", m.kubeplug.Seconds()), anchor: fmt.Sprintf("helm %.2f s", m.helm.Seconds()),
				ratio: fmt.Sprintf("%.2f", m.kubeplug.Seconds()/m.helm.Seconds()),
			})
		}
		summarise(tb, rows...)
	}
}

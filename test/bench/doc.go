// Package bench measures kubeplug against the tools users know, side by side in
// one run, and prints each of issue 42's [perf] targets beside its anchor:
//   - apply on the local control plane against kubectl apply --server-side, helm
//     install (one release per plugin) and a bare parallel server-side-apply loop,
//     the limit here (BenchmarkApplySizes, BenchmarkNoopApply1000);
//   - `kubeplug up` of the quickstart with every pool simulated against a
//     kwok-only start of the same control plane and Nodes (BenchmarkUp), and with
//     its real node against the simulated one (BenchmarkUpRealNode);
//   - the CLI's own start, `kubeplug --help` and `version` (time, peak RSS),
//     against the whole CLI's start, and the release binary's size
//     (BenchmarkStart);
//   - `make up` on a fresh machine, empty Go caches (BenchmarkMakeUpCold, opt-in:
//     KUBEPLUG_BENCH_COLD=1).
//
// Run it with `make bench`; it reports ratios, since absolute times on a shared
// machine mean little, and the CPU of kubeplug and of the cluster's processes.
// Each benchmark appends its targets to $KUBEPLUG_BENCH_SUMMARY, which make bench
// prints last as one table.
package bench

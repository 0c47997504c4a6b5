// Package bench measures kubeplug apply against the tools users know, side by side
// in one run on the local control plane: kubectl apply --server-side, helm install
// (one release per plugin), and a bare parallel server-side-apply loop, the limit
// here; and `kubeplug up` of the quickstart with every pool simulated against a
// kwok-only start of the same control plane and Nodes (BenchmarkUp); and the CLI's
// own start, `kubeplug --help` and `version` (time, peak RSS) against the whole
// CLI's start, and the release binary's size (BenchmarkStart). Run it with
// `make bench`; it reports ratios, since absolute times on a shared machine mean
// little, each [perf] target beside its anchor, and the CPU of kubeplug and of the
// control plane.
package bench

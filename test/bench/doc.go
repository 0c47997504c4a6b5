// Package bench measures kubeplug apply against the tools users know, side by side
// in one run on the local control plane: kubectl apply --server-side, helm install
// (one release per plugin), and a bare parallel server-side-apply loop, the limit
// here. Run it with `make bench`; it reports ratios, since absolute times on a shared
// machine mean little.
package bench

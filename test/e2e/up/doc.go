// Package up tests kubeplug's main job end to end through the CLI: kubeplug up
// brings a local cluster (control plane, simulated nodes, plugins) up from a cluster
// file, follows changes to the file, and kubeplug down stops it.
package up

// Package lock reads, writes and checks kubeplug.lock, the file beside cluster.yaml
// that pins every plugin a resolution picked: its name, version, origin and package
// digest, like go.sum or Helm's Chart.lock.
//
// `kubeplug lock` writes it; `kubeplug lock --locked` fails, writing nothing, when
// the file would change (for CI). Every plan, render and apply checks the plugins it
// resolved against it: a plugin whose locked version now has another digest (a
// package changed upstream under the same version) is refused naming both digests.
package lock

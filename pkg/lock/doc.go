// Package lock reads, writes and checks kubeplug.lock, the file beside cluster.yaml
// that pins every plugin a resolution picked: its name, version, origin and package
// digest, and the charts its Helm releases name by reference (version and archive
// digest), like go.sum or Helm's Chart.lock.
//
// The lock is the pin: every resolution of a cluster file with a lock beside it
// prefers the locked versions (resolve.Request.Prefer), so a version published
// after the lock was written is not taken until `kubeplug lock --update [NAME...]`
// (or --update on plan, render, apply and up) moves it; a locked version the
// cluster file's constraints no longer admit gives way to the highest they do.
// `kubeplug lock` writes the file; `kubeplug lock --locked` fails, writing
// nothing, when the file would change (for CI). Every plan, render and apply
// checks the plugins it resolved against it: a plugin whose locked version now
// has another digest (a package changed upstream under the same version) is
// refused naming both digests.
package lock

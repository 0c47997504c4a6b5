// Package kube holds what every part of the deployer shares to talk to one
// cluster: the clients (dynamic, typed, discovery-backed REST mapping), the retry
// policy for transient API errors, object references that survive API version
// changes, and the labels and field manager kubeplug puts on what it writes.
//
// It knows nothing of plugins, waves or releases: the state, helm, ssa, drift and
// crd packages build on a *Client, and the deploy package composes them.
package kube

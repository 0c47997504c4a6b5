package action

import (
	"context"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// PluginInfo describes one available plugin version.
type PluginInfo struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Origin   string `json:"origin"`
	Location string `json:"location"`
	Digest   string `json:"digest"`
	// SignedBy names the trusted key whose signature the source verified
	// when it fetched the package ("NAME (ID)"); empty when none did (a
	// source without a trust policy, or an unsigned package it allows).
	SignedBy    string `json:"signedBy,omitempty"`
	Description string `json:"description,omitempty"`
	// Enabled is set when listing for a cluster file: this version is the one the
	// cluster's constraint selects.
	Enabled bool `json:"enabled,omitempty"`
}

// List lists the plugins every source offers.
type List struct {
	cfg *Config
	// Cluster, when set, adds the cluster spec's sources and marks what it enables.
	Cluster *config.Cluster
}

// NewList returns a List action.
func NewList(cfg *Config) *List { return &List{cfg: cfg} }

// Run lists plugins by name, newest version first. Diagnostics hold the sources'
// problems and shadowing warnings; the list holds every plugin that loaded.
func (a *List) Run(ctx context.Context) ([]PluginInfo, diag.List) {
	cl, idx, l := a.cfg.loadFor(ctx, a.Cluster)
	if idx == nil {
		return nil, l
	}
	enabled := map[string]bool{}
	if cl != nil {
		for _, ref := range cl.Enabled() {
			if v, err := idx.Find(ref.Name, ref.Version); err == nil {
				enabled[v.ID()] = true
			}
		}
	}
	// Every package is fetched, shadowed ones too: the list shows digests, and the
	// problems of every package in the sources.
	all := idx.All()
	pkgs, fl := source.FetchAll(ctx, idx, append(all, idx.Shadowed...), fetchParallelism)
	l = append(l, fl...)
	var out []PluginInfo
	for _, p := range pkgs[:len(all)] {
		if p == nil {
			continue
		}
		pi := info(p)
		pi.Enabled = enabled[p.ID()]
		out = append(out, pi)
	}
	l.Sort()
	return slices.Clip(out), l
}

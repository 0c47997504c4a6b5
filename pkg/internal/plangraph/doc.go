// Package plangraph draws a plan's dependency graph: its plugins as nodes, one
// column per wave, and an edge from each plugin to every plugin that waits for
// it (engine.PlanPlugin.After).
//
// Two forms are written from the same engine.PlanDoc: DOT, for Graphviz and
// the tools that read it, and SVG, laid out here in Go so that neither
// kubeplug plan --graph nor the dashboard needs Graphviz at run time. The
// layout is deliberately simple and deterministic — waves left to right, the
// plugins of a wave top to bottom in plan order — so the same plan always
// draws the same picture and golden files can hold it.
package plangraph

// Package action holds one object per kubeplug verb — list, show, lint, scaffold,
// validate — each a struct of options with a Run method. The CLI and the controller
// only bind their inputs to these objects, so a library user gets exactly what the
// command line does.
package action

// Package cmd is kubeplug's command line: cobra commands that parse flags, bind them
// to the action objects of pkg/action, and print results as text, JSON or YAML. It
// holds no logic of its own beyond presentation.
package cmd

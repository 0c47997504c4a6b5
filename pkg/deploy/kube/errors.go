package kube

import "fmt"

// UnitError is one plugin's failure: in a wave, in a drift check, in a refused
// CustomResourceDefinition change.
type UnitError struct {
	Plugin string
	// Object is the object that failed, when one did.
	Object string
	Err    error
}

func (e *UnitError) Error() string {
	if e.Object != "" {
		return fmt.Sprintf("plugin %s: %s: %v", e.Plugin, e.Object, e.Err)
	}
	return fmt.Sprintf("plugin %s: %v", e.Plugin, e.Err)
}

func (e *UnitError) Unwrap() error { return e.Err }

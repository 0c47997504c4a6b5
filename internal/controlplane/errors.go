package controlplane

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrBinariesNotFound means the localcluster binaries are missing. Run
	// `make localcluster` or point KUBEPLUG_LOCALCLUSTER_BIN at a directory that
	// holds them. Not retryable.
	ErrBinariesNotFound = errors.New("local control plane binaries not found")

	// ErrComponentExited means a component process exited while the control
	// plane was starting or restarting it. Its log is in DataDir/logs.
	ErrComponentExited = errors.New("component exited")

	// ErrStopped means the control plane was already stopped.
	ErrStopped = errors.New("control plane stopped")

	// ErrUnknownComponent means a Component value that is not one of the
	// constants of this package.
	ErrUnknownComponent = errors.New("unknown component")
)

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

// Sentinel errors of detached control planes.
var (
	// ErrNotRunning means the data directory records no running control plane.
	ErrNotRunning = errors.New("control plane not running")

	// ErrRunning means Start found the data directory's control plane running;
	// use Attach.
	ErrRunning = errors.New("control plane already running")

	// ErrDegraded means some components of a detached control plane run and
	// others do not, or its API server is not ready.
	ErrDegraded = errors.New("control plane degraded")

	// ErrIncompatibleState means the data directory was written by a version
	// of this package that this one cannot read; remove the data directory.
	ErrIncompatibleState = errors.New("incompatible control plane state")

	// ErrPortInUse means a fixed port is held by another process.
	ErrPortInUse = errors.New("port in use")
)

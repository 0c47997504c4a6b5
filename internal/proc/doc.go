// Package proc holds what the exec and gRPC runtimes and the validate exec checks
// share about running a package's executable: checking its digest and running
// exactly the checked bytes (Pinned keeps them for a runtime's many runs), its
// environment, killing its whole process group, and capturing its stderr.
package proc

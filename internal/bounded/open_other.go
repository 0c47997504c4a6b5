//go:build !unix

package bounded

import "os"

// openNonBlocking opens path for reading.
func openNonBlocking(path string) (*os.File, error) {
	return os.Open(path) //nolint:gosec // the caller names the file
}

//go:build unix

package bounded

import (
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without blocking: opening a FIFO that
// has no writer returns at once (and reads as empty) instead of waiting forever.
// Regular files ignore the flag.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) //nolint:gosec // the caller names the file
}

//go:build !unix

package portblock

import (
	"errors"
	"os"
)

// lockFile: blocks are reserved with flock(2), which only unix systems have;
// elsewhere no block is ever free, and callers fall back to ports of their own.
func lockFile(string) (*os.File, bool, error) {
	return nil, false, errors.New("port blocks need flock(2), which this system lacks")
}

package proc

import (
	"io/fs"
	"syscall"
)

// changeTime returns a file's change time (ctime), which no process can set.
func changeTime(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}

package controlplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// detachedSysProcAttr starts the child in a session of its own (hence its own
// process group, whose id is its pid) without a parent-death signal, so that it
// outlives the caller and no terminal signal reaches it.
func detachedSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// procStartTime reads a process's start time (clock ticks since boot, field 22 of
// /proc/<pid>/stat). With the pid it identifies a process across pid reuse.
func procStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// procStat returns the state letter and start time of a process.
func procStat(pid int) (string, uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("parse /proc/%d/stat start time: %w", pid, err)
	}
	return fields[0], start, nil
}

// processAlive says whether pid runs and, when startTime is not 0, is the same
// process that was recorded. A zombie counts as gone.
func processAlive(pid int, startTime uint64) bool {
	if pid <= 0 {
		return false
	}
	state, start, err := procStat(pid)
	if err != nil {
		return false
	}
	if state == "Z" || state == "X" {
		return false
	}
	return startTime == 0 || start == startTime
}

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far, user and system:
// taken around an apply, what kubeplug itself costs (the API server runs in
// other processes).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerObject is CPU time per object in microseconds.
func cpuPerObject(d time.Duration, objects int) float64 {
	return float64(d.Microseconds()) / float64(objects)
}

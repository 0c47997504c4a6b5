package ssa

import (
	"slices"
	"testing"
	"time"
)

// TestWaitsLookAgainSoonThenEveryPollInterval: a wait looks again 20 ms after
// its first look, then 40, 80, 160 ms, then every 250 ms: what is ready
// within tens of milliseconds (a Deployment on simulated nodes) is not seen a
// fixed 250 ms late, and what takes seconds costs no more looks than before.
func TestWaitsLookAgainSoonThenEveryPollInterval(t *testing.T) {
	var got []time.Duration
	for interval := pollFirst; len(got) < 7; interval = backoff(interval) {
		got = append(got, interval)
	}
	ms := time.Millisecond
	if want := []time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 250 * ms, 250 * ms, 250 * ms}; !slices.Equal(got, want) {
		t.Errorf("intervals %v, want %v", got, want)
	}
}

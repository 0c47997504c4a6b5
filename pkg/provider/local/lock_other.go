//go:build !unix

package local

import (
	"context"
	"time"
)

// lock is a no-op where flock is missing: two kubeplug processes on one state
// dir are not detected there.
func (p *Provider) lock(context.Context) (func(), error) { return func() {}, nil }

// Lock implements provider.Locker as a no-op where flock is missing.
func (p *Provider) Lock(context.Context, string, time.Duration, func(holder, op string, waited time.Duration)) (func(), error) {
	return func() {}, nil
}

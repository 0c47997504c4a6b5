package state

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// freshGz is gz without the pool: what a new gzip.Writer at the same level
// writes.
func freshGz(raw []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return buf.Bytes()
}

// TestGzPooledIsByteIdentical checks that a pooled, reset writer writes exactly
// the bytes a new one does (chunk names are digests of them), also when used
// from many goroutines at once, and that the output reads back.
func TestGzPooledIsByteIdentical(t *testing.T) {
	inputs := [][]byte{nil, []byte("{}"), []byte(strings.Repeat(`{"kind":"ConfigMap","data":{"a":"b"}},`, 5000))}
	for i := range 20 {
		inputs = append(inputs, fmt.Appendf(nil, "%d %s", i, strings.Repeat(fmt.Sprint(i*7919), 1000+i*97)))
	}
	var wg sync.WaitGroup
	for round := range 4 {
		for i, in := range inputs {
			wg.Go(func() {
				got, want := gz(in), freshGz(in)
				if !bytes.Equal(got, want) {
					t.Errorf("round %d input %d: pooled gzip differs from a new writer's (%d vs %d bytes)", round, i, len(got), len(want))
				}
				back, err := gunzip(got)
				if err != nil || !bytes.Equal(back, in) {
					t.Errorf("round %d input %d: does not read back: %v", round, i, err)
				}
			})
		}
	}
	wg.Wait()
}

// BenchmarkGz compresses a record head's worth of JSON (a few KiB):
//
//	go test ./pkg/deploy/state -run '^$' -bench Gz
func BenchmarkGz(b *testing.B) {
	raw := []byte(strings.Repeat(`{"group":"","version":"v1","kind":"ConfigMap","namespace":"bench","name":"p00-cm00"},`, 50))
	b.Run("pooled", func(b *testing.B) {
		for b.Loop() {
			gz(raw)
		}
	})
	b.Run("new-writer", func(b *testing.B) {
		for b.Loop() {
			freshGz(raw)
		}
	})
}

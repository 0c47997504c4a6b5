// Command goplugin is the smallest Go exec plugin: it answers every stage at
// once. BenchmarkRunGo builds it.
package main

import (
	"io"
	"os"
)

func main() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	_, _ = os.Stdout.WriteString(`{"protocolVersion":"kubeplug.dev/exec/v1"}` + "\n")
}

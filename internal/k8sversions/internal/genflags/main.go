// Command genflags writes internal/k8sversions' flag tables from the --help of
// the components this repository builds (make localcluster): one file per
// component under flags/<kubernetes version>/. Run it through
// `go generate ./internal/k8sversions`; it reads the binaries from each
// directory of $KUBEPLUG_LOCALCLUSTER_BIN (a list like $PATH), default
// ../../_output/localcluster/bin and ../../_output/localcluster-1.36/bin, and
// skips a default directory that does not exist.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
)

func main() {
	dirs := filepath.SplitList(os.Getenv("KUBEPLUG_LOCALCLUSTER_BIN"))
	explicit := len(dirs) > 0
	if !explicit {
		dirs = []string{"../../_output/localcluster/bin", "../../_output/localcluster-1.36/bin"}
	}
	n := 0
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil && !explicit {
			continue
		}
		if err := write(context.Background(), dir); err != nil {
			fmt.Fprintf(os.Stderr, "genflags: %v\n", err)
			os.Exit(1)
		}
		n++
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "genflags: no binaries: run make localcluster or set KUBEPLUG_LOCALCLUSTER_BIN")
		os.Exit(1)
	}
}

// write writes the tables of the binaries in dir.
func write(ctx context.Context, dir string) error {
	version, tables, err := k8sversions.ReadFlagTables(ctx, dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	out := filepath.Join("flags", version)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, t := range tables {
		if err := os.WriteFile(filepath.Join(out, t.Component+".yaml"), t.Encode(version), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("genflags: %s: %d components of Kubernetes %s\n", dir, len(tables), version)
	return nil
}

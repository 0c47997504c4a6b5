package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// MarkerFile is written at the top of every directory Write produces. Write replaces
// an existing non-empty directory only when it holds the marker, so that a mistyped
// output path cannot wipe out unrelated files.
const MarkerFile = ".kubeplug-render"

// Write renders in and replaces dir with the result. The files are written into a
// temporary sibling directory that is renamed over dir only once complete, so on any
// error dir is left as it was and no temporary directory is left behind. Cancelling
// ctx before the rename leaves dir untouched.
func Write(ctx context.Context, in Input, dir string) diag.List {
	files, diags := Files(ctx, in)
	if diags.HasFatal() {
		return diags
	}
	diags = append(diags, WriteFiles(ctx, dir, files)...)
	return diags
}

// writeDir returns leftover when the render succeeded but the previous render could
// not be removed.
func writeDir(ctx context.Context, dir string, files map[string][]byte) (leftover, err error) {
	dir = filepath.Clean(dir)
	exists, err := replaceable(dir)
	if err != nil {
		return nil, err
	}
	parent, base := filepath.Split(dir)
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory next to %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp) // best effort: the error being returned matters more
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("setting the mode of %s: %w", tmp, err)
	}
	if err := writeTree(tmp, dir, files); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", dir, err)
	}
	return swapIn(tmp, dir, exists)
}

// writeTree writes the marker file and files into tmp, the directory that
// becomes dir; a name that is not a file inside it is refused.
func writeTree(tmp, dir string, files map[string][]byte) error {
	marker := []byte("Written by kubeplug render; the whole directory is replaced on the next render.\n")
	if err := os.WriteFile(filepath.Join(tmp, MarkerFile), marker, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", MarkerFile, err)
	}
	for _, name := range sortedKeys(files) {
		p := filepath.FromSlash(name)
		if !filepath.IsLocal(p) || name == MarkerFile {
			return fmt.Errorf("refusing to write %q: not a file inside %s", name, dir)
		}
		full := filepath.Join(tmp, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", name, err)
		}
		if err := os.WriteFile(full, files[name], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// swapIn moves the written tmp into dir's place. When dir exists, two
// renames: the old render moves aside, the new one takes its place, and the
// old one comes back if that fails. Between them dir is briefly missing,
// never partial. leftover is an old render that could not be removed.
func swapIn(tmp, dir string, exists bool) (leftover, err error) {
	if !exists {
		if err := os.Rename(tmp, dir); err != nil {
			return nil, fmt.Errorf("moving the render into %s: %w", dir, err)
		}
		return nil, nil
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return nil, fmt.Errorf("moving the previous render %s aside: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return nil, fmt.Errorf("moving the render into %s: %w (and restoring the previous render from %s: %w)", dir, err, old, rerr)
		}
		return nil, fmt.Errorf("moving the render into %s: %w", dir, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("removing the previous render %s: %w", old, err), nil
	}
	return nil, nil
}

// replaceable reports whether dir exists, and refuses a dir that Write must not replace.
func replaceable(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("refusing to replace %s: it is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return true, nil
	}
	if _, err := os.Lstat(filepath.Join(dir, MarkerFile)); err != nil {
		return false, fmt.Errorf("refusing to replace %s: it is not empty and has no %s, so it is not a previous render", dir, MarkerFile)
	}
	return true, nil
}

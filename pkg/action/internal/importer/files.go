package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// readFile reads a source file whole, bounded by the package file limit, with an
// error naming it.
func readFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", name)
	}
	if fi.Size() > plugin.MaxFileSize {
		return nil, fmt.Errorf("read %s: %d bytes, past the %d-byte limit for a file", name, fi.Size(), plugin.MaxFileSize)
	}
	data, err := os.ReadFile(name) //nolint:gosec // the user's own input
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
	}
	return data, nil
}

// unwrapPath drops the path an *fs.PathError repeats, since callers name it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readTree reads the regular files of a directory, or of the gzipped tar archive
// at name, by slash path. An archive is unpacked in memory with the package
// archive checks: an entry that is absolute, climbs out with "..", is a link out
// of the tree or a device is an error naming the entry and the file. A symlink in
// a directory is an error naming it: what it points at is not part of the source.
func readTree(name string) (map[string][]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
	}
	var fsys fs.FS
	if fi.IsDir() {
		fsys = os.DirFS(name)
	} else {
		f, err := os.Open(name) //nolint:gosec // the user's own input
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
		}
		defer func() { _ = f.Close() }()
		fsys, err = archive.Extract(f, archive.Limits{})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	out, err := treeOf(fsys)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
	}
	return out, nil
}

// unpack reads the files of a gzipped tar archive held in memory, with the
// checks of [readTree].
func unpack(data []byte) (map[string][]byte, error) {
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return nil, err
	}
	return treeOf(fsys)
}

// treeOf reads the regular files of fsys by slash path, leaving .git out.
func treeOf(fsys fs.FS) (map[string][]byte, error) {
	out := map[string][]byte{}
	var total int64
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; import a tree of regular files", p)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > plugin.MaxPackageSize {
			return fmt.Errorf("the files hold more than %d bytes, past the package limit", plugin.MaxPackageSize)
		}
		out[p] = data
		return nil
	})
	return out, err
}

// subtree returns the files of tree below dir, by path relative to dir.
func subtree(tree map[string][]byte, dir string) map[string][]byte {
	out := map[string][]byte{}
	for p, data := range tree {
		if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
			out[rel] = data
		}
	}
	return out
}

// decodeMap decodes one YAML document into a generic map, naming file.
func decodeMap(file string, data []byte) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: %w: the file is empty", file, ErrFormat)
	}
	return m, nil
}

// decodeDocs decodes every document of a YAML stream into generic maps, with
// JSON's types (numbers as float64), naming file in errors.
func decodeDocs(file string, data []byte) ([]map[string]any, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var out []map[string]any
	for i := 0; ; i++ {
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if v == nil {
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w: not a mapping", file, i+1, ErrFormat)
		}
		out = append(out, m)
	}
}

// base is the file name of a slash or OS path.
func base(p string) string { return path.Base(filepath.ToSlash(p)) }

// decodeLoose decodes YAML into v, ignoring fields v does not name, with an error
// naming file.
func decodeLoose(file string, data []byte, v any) error {
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package action

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Package writes a plugin package directory as a deterministic archive (see package
// archive): the same bytes for the same tree, with the directory's package digest.
type Package struct {
	cfg *Config
	// Output is the archive to write; NAME-VERSION.tgz in the working directory when
	// empty.
	Output string
}

// NewPackage returns a Package action.
func NewPackage(cfg *Config) *Package { return &Package{cfg: cfg} }

// PackageResult is what [Package.Run] wrote.
type PackageResult struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// File is the archive written.
	File string `json:"file"`
	// Digest is the package digest, the one `plugin list` shows for the directory
	// and for the archive.
	Digest string `json:"digest"`
}

// Run checks the package in dir whole (as lint does) and writes it; a package with
// fatal problems is not written. The archive is unpacked again before it replaces
// Output, and must give the directory's digest.
func (a *Package) Run(ctx context.Context, dir string) (*PackageResult, diag.List) {
	var l diag.List
	if err := ctx.Err(); err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, l
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		l.Errorf(dir, 0, 0, "", "expected a plugin package directory (holding %s)", plugin.ManifestFile)
		return nil, l
	}
	fsys := os.DirFS(dir)
	pkg, l := plugin.Load(fsys, plugin.OriginUser, filepath.Clean(dir))
	if pkg == nil || l.HasFatal() {
		return nil, l
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err != nil {
		l.Errorf(dir, 0, 0, "", "cannot package plugin %s: %v", pkg.ID(), err)
		return nil, l
	}
	out := a.Output
	if out == "" {
		out = pkg.Name + "-" + pkg.Version.String() + archive.Ext
	}
	// The archive must hold what the directory held: check before writing.
	back, err := archive.Extract(bytes.NewReader(buf.Bytes()), archive.Limits{})
	if err == nil {
		var d string
		if d, err = plugin.Digest(back); err == nil && d != pkg.Digest {
			err = fmt.Errorf("the archive has digest %s, the directory %s", d, pkg.Digest)
		}
	}
	if err != nil {
		l.Errorf(dir, 0, 0, "", "cannot package plugin %s: %v", pkg.ID(), err)
		return nil, l
	}
	if err := writeFileAtomic(out, buf.Bytes()); err != nil {
		l.Errorf(out, 0, 0, "", "cannot write the archive of plugin %s: %v", pkg.ID(), err)
		return nil, l
	}
	a.cfg.logger().Debug("packaged plugin", "plugin", pkg.ID(), "file", out, "digest", pkg.Digest)
	return &PackageResult{Name: pkg.Name, Version: pkg.Version.String(), File: out, Digest: pkg.Digest}, l
}

// writeFileAtomic writes data to a temporary file beside name and renames it over
// name, so that a reader never sees half an archive.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

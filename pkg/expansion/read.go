package expansion

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Limits bound what [Open] accepts. A zero field takes its default.
type Limits struct {
	// MaxFileSize bounds one file; default 16 GiB.
	MaxFileSize int64
	// MaxSize bounds the sum of the files; default 256 GiB.
	MaxSize int64
	// MaxEntries bounds the entries (files and directories); default 100000.
	MaxEntries int
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = 16 << 30
	}
	if l.MaxSize <= 0 {
		l.MaxSize = 256 << 30
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 100000
	}
	return l
}

// The small files Open keeps in memory, and their bounds.
var kept = map[string]int64{
	ManifestFile:                       MaxManifestSize,
	ChecksumsFile:                      16 << 20,
	SignatureFile:                      4 << 10,
	path.Join(ImagesDir, "index.json"): 4 << 20,
}

// ErrLimit is wrapped by the errors of [Open] for packages past its [Limits].
var ErrLimit = errors.New("expansion exceeds a limit")

// File is one regular file of a package.
type File struct {
	// Path is the file's path inside the package, with forward slashes.
	Path string `json:"path"`
	// Size in bytes.
	Size int64 `json:"size"`
	// Digest is sha256:HEX of the file's bytes.
	Digest string `json:"digest"`
	// Executable says whether any execute bit is set.
	Executable bool `json:"executable,omitempty"`
}

// Package is an expansion as [Open] read it.
type Package struct {
	// Location is the directory or archive it was read from.
	Location string
	// Archive says whether Location is a tar archive.
	Archive bool
	// Manifest is expansion.yaml, decoded and checked; nil when it is broken.
	Manifest *v1alpha1.Expansion
	// Files are the package's regular files by path.
	Files map[string]File
	// Checksums is checksums.txt by path (sha256:HEX); nil when the package has
	// none (a source directory that expansion create has not packed yet).
	Checksums map[string]string
	// Signature is checksums.txt.sig; nil when the package is not signed.
	Signature []byte
	// Images are the images of the package's OCI image layout, by the full
	// reference each manifest is annotated with, sorted.
	Images []string

	checksums []byte
	doc       *yamldoc.Doc
	// index is images/index.json; nil without images.
	index []byte
	// offsets are where each file's bytes start in an uncompressed archive,
	// so that images are pushed straight from it; nil for a gzipped one.
	offsets map[string]int64
	// source is set for a directory being packed: images and pulled plugins
	// are not there yet.
	source bool
	// layoutBudget is what is left of maxLayoutJSON; layoutOver says it ran
	// out (see checkLayout).
	layoutBudget int64
	layoutOver   bool
}

// Digest is the package's digest: the SHA-256 of its checksums.txt, which pins
// every other file. It is empty when the package has no checksums.txt.
func (p *Package) Digest() string {
	if p.Checksums == nil {
		return ""
	}
	return p.Files[ChecksumsFile].Digest
}

// Name is the manifest's name@version, or the location when the manifest is broken.
func (p *Package) Name() string {
	if p.Manifest == nil {
		return p.Location
	}
	return p.Manifest.Metadata.Name + "@" + p.Manifest.Metadata.Version
}

// where names a file of the package in diagnostics.
func (p *Package) where(name string) string { return path.Join(p.Location, name) }

// Open reads the expansion at loc — a directory, or a tar archive (optionally
// gzipped) — in one pass, hashing every file, and checks it: the manifest, that
// every file it names is there, and, when the package has checksums.txt, that
// every file has the digest listed and nothing is missing or extra. It does not
// check the signature: see [Package.Verify]. The package is nil only when loc
// cannot be read at all; its Manifest is nil when any diagnostic is fatal.
func Open(ctx context.Context, loc string, lim Limits) (*Package, diag.List) {
	return open(ctx, loc, lim, false)
}

// OpenSource is [Open] for a source directory that expansion create packs: the
// images and the plugins it names by reference need not be in it yet.
func OpenSource(ctx context.Context, loc string, lim Limits) (*Package, diag.List) {
	return open(ctx, loc, lim, true)
}

func open(ctx context.Context, loc string, lim Limits, source bool) (*Package, diag.List) {
	lim = lim.withDefaults()
	var l diag.List
	fi, err := os.Stat(loc)
	if err != nil {
		l.Errorf(loc, 0, 0, "", "cannot read the expansion: %v", unwrapPath(err))
		return nil, l
	}
	p := &Package{Location: loc, Files: map[string]File{}, source: source, layoutBudget: maxLayoutJSON}
	keep := map[string][]byte{}
	var rerr error
	switch {
	case fi.IsDir():
		rerr = p.readDir(ctx, lim, keep)
	case !fi.Mode().IsRegular():
		// A FIFO would block (and a device never end) before any limit applies.
		l.Errorf(loc, 0, 0, "", "cannot read the expansion: it is a %s, not a directory or a regular archive file", bounded.Kind(fi.Mode()))
		return nil, l
	default:
		p.Archive = true
		rerr = p.readTar(ctx, lim, keep)
	}
	if rerr != nil {
		l.Errorf(loc, 0, 0, "", "%v", rerr)
		return p, l
	}
	p.check(keep, &l)
	l.Sort()
	if l.HasFatal() {
		p.Manifest = nil
	}
	return p, l
}

// add records one file read from r, hashing it and keeping it when it is one of
// the small files Open parses.
func (p *Package) add(name string, size int64, exec bool, r io.Reader, keep map[string][]byte) error {
	h := sha256.New()
	var buf *bytes.Buffer
	if limit, ok := kept[name]; ok {
		if size > limit {
			return fmt.Errorf("%w: %s is %d bytes, past its %d-byte limit", ErrLimit, name, size, limit)
		}
		buf = &bytes.Buffer{}
		r = io.TeeReader(r, buf)
	}
	// The image layout's small JSON blobs are kept to walk their references
	// (checkLayout); layers are dropped at their first byte.
	var jk *jsonKeeper
	if strings.HasPrefix(name, blobsDir) && size <= maxManifest {
		jk = &jsonKeeper{budget: &p.layoutBudget}
		r = io.TeeReader(r, jk)
	}
	n, err := io.Copy(h, io.LimitReader(r, size+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("read %s: %d bytes, expected %d (truncated, or changed while read)", name, n, size)
	}
	if buf != nil {
		keep[name] = buf.Bytes()
	}
	if jk != nil {
		p.layoutOver = p.layoutOver || jk.over
		if !jk.rejected {
			keep[name] = jk.buf
		}
	}
	p.Files[name] = File{Path: name, Size: size, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Executable: exec}
	return nil
}

func (p *Package) readDir(ctx context.Context, lim Limits, keep map[string][]byte) error {
	var total int64
	entries := 0
	root := p.Location
	return filepath.WalkDir(root, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if fp == root {
			return nil
		}
		rel, err := filepath.Rel(root, fp)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if entries++; entries > lim.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrLimit, lim.MaxEntries)
		}
		switch t := d.Type(); {
		case d.IsDir():
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		case t.IsRegular():
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; an expansion holds regular files and directories", rel)
		default:
			return fmt.Errorf("%s is a %s; an expansion holds regular files and directories", rel, t)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := sizeOK(rel, info.Size(), &total, lim); err != nil {
			return err
		}
		f, err := os.Open(fp)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		return p.add(rel, info.Size(), info.Mode().Perm()&0o111 != 0, ctxReader{ctx, f}, keep)
	})
}

func sizeOK(name string, size int64, total *int64, lim Limits) error {
	if size > lim.MaxFileSize {
		return fmt.Errorf("%w: %s is %d bytes, past the %d-byte limit for a file", ErrLimit, name, size, lim.MaxFileSize)
	}
	if *total += size; *total > lim.MaxSize {
		return fmt.Errorf("%w: the files hold more than %d bytes", ErrLimit, lim.MaxSize)
	}
	return nil
}

// gzipMagic starts a gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// readTar reads the package's archive (a tar, gzipped or not) entry by entry
// into p.Files within lim, recording each file's offset when it is not
// compressed; an entry that breaks a rule ends it with an error naming it.
//
// Branches: the archive rules in the order an entry meets them while the archive
// streams (end, global header, entry count, entry name, duplicate, entry type,
// sizes), as archive.Extract checks them; the running totals stay in one place.
func (p *Package) readTar(ctx context.Context, lim Limits, keep map[string][]byte) error {
	f, _, err := bounded.OpenFile(p.Location)
	if err != nil {
		return fmt.Errorf("cannot read the expansion: %w", err)
	}
	defer func() { _ = f.Close() }()
	tr, cr, closeFn, err := tarReader(ctxReader{ctx, f})
	if err != nil {
		return err
	}
	defer closeFn()
	if cr != nil {
		p.offsets = map[string]int64{}
	}
	var total int64
	entries := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w (truncated or not a tar archive)", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if entries++; entries > lim.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrLimit, lim.MaxEntries)
		}
		name, err := EntryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if _, dup := p.Files[name]; dup {
			return fmt.Errorf("entry %q appears twice in the archive", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is how old tars mark files
		default:
			return fmt.Errorf("entry %q is %s; an expansion holds regular files and directories", h.Name, entryType(h.Typeflag))
		}
		if err := sizeOK(name, h.Size, &total, lim); err != nil {
			return err
		}
		if cr != nil {
			// tar.Reader has read the header (and the padding before it)
			// exactly: the file's bytes start here.
			p.offsets[name] = cr.n
		}
		if err := p.add(name, h.Size, h.Mode&0o111 != 0, tr, keep); err != nil {
			return err
		}
	}
}

// tarReader reads a tar stream, gunzipping it when it starts with gzip's magic.
// For an uncompressed stream it also returns the counter of the bytes the tar
// reader consumed: the offset in the file.
func tarReader(r io.Reader) (*tar.Reader, *counter, func(), error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(2)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read archive: %w (empty or truncated)", err)
	}
	if bytes.Equal(head, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("not a gzipped archive: %w", err)
		}
		return tar.NewReader(zr), nil, func() { _ = zr.Close() }, nil
	}
	c := &counter{r: br}
	return tar.NewReader(c), c, func() {}, nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func entryType(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "a device file"
	case tar.TypeFifo:
		return "a FIFO"
	}
	return "of type " + strconv.Quote(string(t))
}

// EntryName checks an archive entry's name and returns it in clean form ("." for
// the root): a leading "./" and a trailing "/" are dropped; absolute names,
// "..", backslashes and names that are not clean are refused.
func EntryName(n string) (string, error) {
	s := strings.TrimSuffix(strings.TrimPrefix(n, "./"), "/")
	if s == "" || s == "." {
		return ".", nil
	}
	if err := CleanPath(s); err != nil {
		return "", fmt.Errorf("entry %q: %w", n, err)
	}
	return s, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// check decodes the kept files and checks the package against its manifest and
// its checksums.
func (p *Package) check(keep map[string][]byte, l *diag.List) {
	data, ok := keep[ManifestFile]
	if !ok {
		l.Errorf(p.where(ManifestFile), 0, 0, "", "the expansion has no %s at its root", ManifestFile)
		return
	}
	m, doc, ml := Decode(p.where(ManifestFile), data)
	*l = append(*l, ml...)
	p.Manifest, p.doc = m, doc
	if sig, ok := keep[SignatureFile]; ok {
		p.Signature = sig
	}
	if idx, ok := keep[path.Join(ImagesDir, "index.json")]; ok {
		p.index = idx
		p.Images = layoutImages(p.where(path.Join(ImagesDir, "index.json")), idx, l)
	}
	if cs, ok := keep[ChecksumsFile]; ok {
		p.checksums = cs
		p.Checksums = parseChecksums(p.where(ChecksumsFile), cs, l)
		p.compareChecksums(l)
		p.checkURLFiles(l)
	} else if p.Archive {
		// create writes checksums.txt last: an archive without it was cut short
		// (or not made by create).
		l.Errorf(p.where(ChecksumsFile), 0, 0, "", "the archive has no %s: it is truncated, or was not made by kubeplug expansion create", ChecksumsFile)
	} else {
		// No checksums: a source directory that expansion create has not
		// packed yet, whose images and pulled plugins are not there yet.
		p.source = true
		if p.Signature != nil {
			l.Errorf(p.where(SignatureFile), 0, 0, "", "the expansion is signed but has no %s to sign", ChecksumsFile)
		}
	}
	if !p.source {
		p.checkLayout(keep, p.layoutOver, l)
	}
	if m != nil {
		p.checkRefs(l)
	}
}

// parseChecksums reads sha256sum's format: "HEX  PATH" per line.
func parseChecksums(file string, data []byte, l *diag.List) map[string]string {
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		n := i + 1
		sum, name, ok := strings.Cut(line, "  ")
		if ok {
			name = strings.TrimPrefix(name, "*")
		}
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
			l.Errorf(file, n, 1, "", "expected \"SHA256  PATH\" (64 lower-case hex digits, two spaces, a path), found %q", line)
			continue
		}
		if err := CleanPath(name); err != nil {
			l.Errorf(file, n, 67, "", "%v", err)
			continue
		}
		if _, dup := out[name]; dup {
			l.Errorf(file, n, 67, "", "%s is listed twice", name)
			continue
		}
		out[name] = "sha256:" + sum
	}
	return out
}

// compareChecksums checks every file against checksums.txt: a file whose digest
// differs was changed (or truncated), one listed but absent was removed, one
// present but not listed was added.
func (p *Package) compareChecksums(l *diag.List) {
	for _, name := range sortedKeys(p.Checksums) {
		want := p.Checksums[name]
		f, ok := p.Files[name]
		switch {
		case !ok:
			l.Errorf(p.where(name), 0, 0, "", "listed in %s but missing from the expansion (removed, or the archive is truncated)", ChecksumsFile)
		case f.Digest != want:
			l.Errorf(p.where(name), 0, 0, "", "digest %s, but %s lists %s: the file was changed after the expansion was made", f.Digest, ChecksumsFile, want)
		}
	}
	for _, name := range sortedKeys(p.Files) {
		if name == ChecksumsFile || name == SignatureFile {
			continue
		}
		if _, ok := p.Checksums[name]; !ok {
			l.Errorf(p.where(name), 0, 0, "", "not listed in %s: the file was added after the expansion was made", ChecksumsFile)
		}
	}
}

// checkRefs checks that every file the manifest names is in the package, and
// every image it lists is in the image layout.
//
// Branches: one check per kind of reference the manifest makes (a plugin's path,
// a pulled plugin, a chart, a node file's source, a node hook's script, an
// executable installer hook script, an image), as plugin.yaml's are checked.
func (p *Package) checkRefs(l *diag.List) {
	s := p.Manifest.Spec
	need := func(ptr, name string, exec bool) {
		f, ok := p.Files[name]
		if !ok {
			if p.isDir(name) {
				return
			}
			p.doc.Errorf(l, ptr, "%s is not in the expansion", name)
			return
		}
		if exec && !f.Executable && !p.source {
			p.doc.Errorf(l, ptr, "%s is not executable (chmod +x it before packing)", name)
		}
	}
	for i, pl := range s.Plugins {
		switch {
		case pl.Path != "":
			need("/spec/plugins/"+strconv.Itoa(i)+"/path", pl.Path, false)
		case !p.source:
			if _, ok := p.Files[PulledPluginPath(pl.Digest)]; !ok {
				p.doc.Errorf(l, "/spec/plugins/"+strconv.Itoa(i)+"/ref", "plugin %s@%s is not in the expansion (expected at %s); expansion create pulls it there", pl.Ref, pl.Digest, PulledPluginPath(pl.Digest))
			}
		}
	}
	for i, c := range s.Charts {
		need("/spec/charts/"+strconv.Itoa(i)+"/path", c.Path, false)
	}
	for i, n := range s.Nodes {
		for j, f := range n.Files {
			if f.Source != "" {
				need(fmt.Sprintf("/spec/nodes/%d/files/%d/source", i, j), f.Source, false)
			}
		}
		for j, h := range n.Hooks {
			if h.Run.Script != "" {
				need(fmt.Sprintf("/spec/nodes/%d/hooks/%d/run/script", i, j), h.Run.Script, false)
			}
		}
	}
	for i, h := range s.Hooks {
		if h.Script != "" {
			need("/spec/hooks/"+strconv.Itoa(i)+"/script", h.Script, true)
		}
	}
	have := map[string]bool{}
	for _, img := range p.Images {
		have[NormalizeImage(img)] = true
	}
	for i, img := range s.Images {
		if !p.source && !have[NormalizeImage(img)] {
			p.doc.Errorf(l, "/spec/images/"+strconv.Itoa(i), "image %s is not in the expansion's image layout (%s/); expansion create pulls it there", img, ImagesDir)
		}
	}
}

// isDir reports whether name is a directory of the package: some file lies below it.
func (p *Package) isDir(name string) bool {
	prefix := name + "/"
	for f := range p.Files {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}

// RefName is the annotation of an OCI image layout's index that names an image.
const RefName = "org.opencontainers.image.ref.name"

// layoutImages reads the image names of an OCI image layout's index.json.
func layoutImages(file string, data []byte, l *diag.List) []string {
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		l.Errorf(file, 0, 0, "", "not an OCI image index: %v", err)
		return nil
	}
	var out []string
	for _, m := range idx.Manifests {
		if n := m.Annotations[RefName]; n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// pkgDir is a package with a subdirectory, an executable file and a symlink.
func pkgDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("plugin.yaml", `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata:
  name: demo
  version: 1.2.3
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
`, 0o644)
	write("manifests/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n", 0o600)
	write("bin/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	if err := os.Symlink("cm.yaml", filepath.Join(dir, "manifests", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteIsDeterministicAndKeepsTheDigest(t *testing.T) {
	dir := pkgDir(t)
	pkg, l := plugin.Load(os.DirFS(dir), plugin.OriginUser, dir)
	if l.HasFatal() {
		t.Fatalf("load: %v", l)
	}
	var a, b bytes.Buffer
	if err := archive.Write(&a, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	// The same tree elsewhere, with other times: the same bytes.
	dir2 := t.TempDir()
	if err := os.CopyFS(dir2, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(filepath.Join(dir2, "plugin.yaml"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if err := archive.Write(&b, os.DirFS(dir2)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two archives of the same tree differ")
	}
	fsys, err := archive.Extract(bytes.NewReader(a.Bytes()), archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, l := plugin.Load(fsys, plugin.OriginUser, "demo.tgz")
	if l.HasFatal() {
		t.Fatalf("load extracted: %v", l)
	}
	if got.Digest != pkg.Digest {
		t.Fatalf("digest from archive %s, from directory %s", got.Digest, pkg.Digest)
	}
	fi, err := fs.Stat(fsys, "bin/run.sh")
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("executable bit lost: %v %v", fi, err)
	}
	// Owners and times are fixed.
	zr, _ := gzip.NewReader(bytes.NewReader(a.Bytes()))
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: owner %d/%d %q, time %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
	}
	want := "bin/ bin/run.sh manifests/ manifests/cm.yaml manifests/link.yaml plugin.yaml"
	if strings.Join(names, " ") != want {
		t.Fatalf("entries %q, want %q", names, want)
	}
}

type entry struct {
	h    tar.Header
	data string
}

func tgz(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.h
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if e.data != "" {
			if _, err := io.WriteString(tw, e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name, data string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeReg}, data: data}
}

func TestExtractRefusesBadArchives(t *testing.T) {
	small := archive.Limits{MaxFileSize: 100, MaxSize: 150, MaxEntries: 3}
	for _, tc := range []struct {
		name    string
		data    []byte
		lim     archive.Limits
		wantErr string
		limit   bool
	}{
		{name: "dotdot", data: tgz(t, file("../evil", "x")), wantErr: `entry "../evil" climbs out`},
		{name: "dotdot inside", data: tgz(t, file("a/../../evil", "x")), wantErr: `entry "a/../../evil" climbs out`},
		{name: "absolute", data: tgz(t, file("/etc/passwd", "x")), wantErr: `entry "/etc/passwd" has an absolute path`},
		{name: "unclean", data: tgz(t, file("a//b", "x")), wantErr: `entry "a//b" is not a clean relative path`},
		{name: "duplicate", data: tgz(t, file("a", "x"), file("a", "y")), wantErr: `entry "a" appears twice`},
		{name: "absolute symlink", data: tgz(t, entry{h: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}), wantErr: `entry "l" is a symlink to "/etc/passwd", outside the package`},
		{name: "climbing symlink", data: tgz(t, entry{h: tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"}}), wantErr: `entry "d/l" is a symlink to "../../x", outside the package`},
		{name: "through a symlink", data: tgz(t, entry{h: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "."}}, file("l/x", "y")), wantErr: `entry "l/x" lies below the symlink "l"`},
		{name: "hard link", data: tgz(t, file("a", "x"), entry{h: tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}}), wantErr: `entry "b" is a hard link`},
		{name: "char device", data: tgz(t, entry{h: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}), wantErr: `entry "null" is a device file`},
		{name: "block device", data: tgz(t, entry{h: tar.Header{Name: "sda", Typeflag: tar.TypeBlock}}), wantErr: `entry "sda" is a device file`},
		{name: "fifo", data: tgz(t, entry{h: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}), wantErr: `entry "p" is a FIFO`},
		{name: "file too large", data: tgz(t, file("big", strings.Repeat("x", 101))), lim: small, wantErr: `entry "big" is 101 bytes`, limit: true},
		{name: "package too large", data: tgz(t, file("a", strings.Repeat("x", 100)), file("b", strings.Repeat("x", 100))), lim: small, wantErr: "the files hold more than 150 bytes", limit: true},
		{name: "too many entries", data: tgz(t, file("a", ""), file("b", ""), file("c", ""), file("d", "")), lim: small, wantErr: "more than 3 entries", limit: true},
		{name: "not gzip", data: []byte("plain text"), wantErr: "not a gzipped archive"},
		{name: "truncated", data: tgz(t, file("a", strings.Repeat("x", 4096)))[:40], wantErr: "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := archive.Extract(bytes.NewReader(tc.data), tc.lim)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if tc.limit != errors.Is(err, archive.ErrLimit) {
				t.Fatalf("errors.Is(err, ErrLimit) = %v, want %v", !tc.limit, tc.limit)
			}
		})
	}
}

// TestExtractRefusesAGzipBombQuickly builds an archive that decompresses to 256 MiB
// (compressed to well under 1 MiB) and checks Extract stops after at most its limit.
func TestExtractRefusesAGzipBombQuickly(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	// Many entries each just under the file limit: no one header is refused, only
	// the running total.
	chunk := make([]byte, 1<<20)
	for i := range 256 {
		_ = tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%04d", i), Typeflag: tar.TypeReg, Size: int64(len(chunk)), Mode: 0o644})
		_, _ = tw.Write(chunk)
	}
	_ = tw.Close()
	_ = zw.Close()
	cr := &countReader{r: bytes.NewReader(buf.Bytes())}
	start := time.Now()
	_, err := archive.Extract(cr, archive.Limits{MaxSize: 8 << 20})
	if !errors.Is(err, archive.ErrLimit) {
		t.Fatalf("err = %v, want a limit error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing the bomb took %v", d)
	}
	if cr.n > int64(buf.Len())/4 {
		t.Errorf("read %d of %d compressed bytes before refusing", cr.n, buf.Len())
	}
}

// TestExtractCountsDecompressedBytes checks the stream itself is bounded, not only
// what the headers declare: a lone huge PAX header is refused by the count.
func TestExtractCountsDecompressedBytes(t *testing.T) {
	data := tgz(t, entry{h: tar.Header{Name: "a", Typeflag: tar.TypeReg, PAXRecords: map[string]string{"comment": strings.Repeat("x", 200<<10)}}, data: "x"})
	_, err := archive.Extract(bytes.NewReader(data), archive.Limits{MaxSize: 1, MaxEntries: 1})
	if !errors.Is(err, archive.ErrLimit) {
		t.Fatalf("err = %v, want a limit error", err)
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestExtractAcceptsRootAndDotSlashEntries(t *testing.T) {
	data := tgz(t, entry{h: tar.Header{Name: "./", Typeflag: tar.TypeDir}}, entry{h: tar.Header{Name: "./d/", Typeflag: tar.TypeDir}}, file("./d/f", "x"), entry{h: tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "f"}})
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "d/f", "d/l"); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "d/l")
	if err != nil || string(b) != "x" {
		t.Fatalf("read through link: %q %v", b, err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(tgz(f, file("plugin.yaml", "x")))
	f.Add(tgz(f, entry{h: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../x"}}))
	f.Add(tgz(f, entry{h: tar.Header{Name: "d/", Typeflag: tar.TypeDir}}, file("d/../../x", "y")))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{MaxSize: 1 << 20, MaxEntries: 100})
		if err != nil {
			return
		}
		// Whatever was accepted stays inside the package: every path is valid and
		// no symlink climbs out.
		_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !fs.ValidPath(p) {
				t.Fatalf("invalid path %q accepted", p)
			}
			if d.Type()&fs.ModeSymlink != 0 {
				target, _ := fs.ReadLink(fsys, p)
				if strings.HasPrefix(target, "/") {
					t.Fatalf("absolute link %q -> %q accepted", p, target)
				}
			}
			return nil
		})
	})
}

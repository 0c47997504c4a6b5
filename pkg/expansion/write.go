package expansion

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/pkg/sign"
)

// WriteOptions say how [Write] packs.
type WriteOptions struct {
	// Signer signs checksums.txt; nil leaves the package unsigned.
	Signer *sign.Signer
	// Executable are paths packed with mode 0755 whatever their mode on disk
	// (the scripts the manifest names as hooks).
	Executable []string
}

// epoch is the time every entry carries, so that archives do not depend on when
// or where they were made.
var epoch = time.Unix(0, 0).UTC()

// Written says what [Write] wrote.
type Written struct {
	// Digest is the package's digest: the SHA-256 of checksums.txt.
	Digest string `json:"digest"`
	// Files and Bytes count the files packed (checksums and signature included)
	// and their bytes.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// KeyID names the key that signed it; empty when unsigned.
	KeyID string `json:"keyID,omitempty"`
	// Images are the images packed, by full reference, sorted.
	Images []string `json:"images,omitempty"`
}

// Write packs the staged package in dir into w as a tar archive, in one pass with
// bounded memory: expansion.yaml first, then every other file in path order,
// then checksums.txt (the SHA-256 of every file before it, computed as they
// streamed past) and, with a signer, checksums.txt.sig. Entries carry fixed
// times, owners and modes (0755 for executables, 0644 otherwise) and no
// directories, so the same tree gives the same bytes; a signed archive differs
// only in its last entry (ECDSA signatures are randomised). dir must not hold
// checksums.txt or its signature, nor anything but regular files and
// directories.
func Write(ctx context.Context, w io.Writer, dir string, opts WriteOptions) (*Written, error) {
	signer := opts.Signer
	var files []string
	err := filepath.WalkDir(dir, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && fp != dir {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, fp)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a %s; an expansion holds regular files and directories", rel, d.Type())
		}
		if rel == ChecksumsFile || rel == SignatureFile {
			return fmt.Errorf("%s is written by the packer; remove it from %s", rel, dir)
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !slices.Contains(files, ManifestFile) {
		return nil, fmt.Errorf("%s has no %s", dir, ManifestFile)
	}
	slices.SortFunc(files, func(a, b string) int {
		// The manifest first: a reader streaming the archive learns what it is
		// before the gigabytes of images.
		switch {
		case a == ManifestFile:
			return -1
		case b == ManifestFile:
			return 1
		}
		return strings.Compare(a, b)
	})
	tw := tar.NewWriter(w)
	out := &Written{}
	var sums bytes.Buffer
	for _, rel := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum, n, err := writeFile(tw, filepath.Join(dir, filepath.FromSlash(rel)), rel, slices.Contains(opts.Executable, rel))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, rel)
		out.Files++
		out.Bytes += n
	}
	if err := writeData(tw, ChecksumsFile, sums.Bytes()); err != nil {
		return nil, err
	}
	d := sha256.Sum256(sums.Bytes())
	out.Digest = "sha256:" + hex.EncodeToString(d[:])
	out.Files++
	out.Bytes += int64(sums.Len())
	if signer != nil {
		sig, err := signer.Sign(bytes.NewReader(sums.Bytes()))
		if err != nil {
			return nil, err
		}
		if err := writeData(tw, SignatureFile, sig); err != nil {
			return nil, err
		}
		out.KeyID = signer.KeyID()
		out.Files++
		out.Bytes += int64(len(sig))
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("finish tar stream: %w", err)
	}
	return out, nil
}

func header(name string, size int64, exec bool) *tar.Header {
	mode := int64(0o644)
	if exec {
		mode = 0o755
	}
	return &tar.Header{Name: name, Size: size, Mode: mode, Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}
}

// writeFile streams one file into the archive and returns its hex SHA-256.
func writeFile(tw *tar.Writer, fp, rel string, exec bool) (string, int64, error) {
	f, err := os.Open(fp)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if err := tw.WriteHeader(header(rel, fi.Size(), exec || fi.Mode().Perm()&0o111 != 0)); err != nil {
		return "", 0, fmt.Errorf("archive %s: %w", rel, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, fi.Size()))
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("file changed size while archived (%d bytes, expected %d)", n, fi.Size())
	}
	if err != nil {
		return "", 0, fmt.Errorf("archive %s: %w", rel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func writeData(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(header(name, int64(len(data)), false)); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}

package nodeimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BinaryImage is the image of one static binary at /<base name>, its entrypoint.
func BinaryImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	entry := filepath.Base(bin)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: entry, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	img, err := oneLayerImage(buf.Bytes(), "amd64", func(c *v1.Config) { c.Entrypoint = []string{"/" + entry} })
	if err != nil {
		return nil, err
	}
	if img == nil {
		return nil, errors.New("empty image")
	}
	return img, nil
}

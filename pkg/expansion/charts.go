package expansion

import (
	"archive/tar"
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
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// Helm's OCI media types: a chart is an artifact whose config is Chart.yaml as
// JSON and whose one layer is the chart's .tgz.
const (
	ChartConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	ChartContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// maxChart bounds a chart pushed (its archive is held in memory).
const maxChart = 64 << 20

// PushCharts pushes the expansion's charts to the registry at host as OCI
// charts, HOST/charts/NAME:VERSION, which `helm pull oci://HOST/charts/NAME
// --version VERSION` fetches. A chart directory is packed as helm package
// packs it (one top-level directory named after the chart), deterministically;
// a .tgz is pushed as it is. A chart whose tag already names the same manifest
// is left alone. It returns the references pushed.
func (e *Loaded) PushCharts(ctx context.Context, host string, opts PushOptions) ([]string, error) {
	var pushed []string
	nameOpts := opts.nameOptions(host)
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	for _, c := range e.Manifest.Spec.Charts {
		tgz, meta, err := e.chartArchive(c.Path)
		if err != nil {
			return pushed, fmt.Errorf("chart %s of expansion %s: %w", c.Name, e.Name(), err)
		}
		var md struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if err := json.Unmarshal(meta, &md); err != nil || md.Name == "" || md.Version == "" {
			return pushed, fmt.Errorf("chart %s of expansion %s: Chart.yaml names no name and version", c.Name, e.Name())
		}
		ref, err := name.ParseReference(host+"/charts/"+md.Name+":"+strings.ReplaceAll(md.Version, "+", "_"), nameOpts...)
		if err != nil {
			return pushed, fmt.Errorf("chart %s: %w", c.Name, err)
		}
		cfg := static.NewLayer(meta, ChartConfigMediaType)
		content := static.NewLayer(tgz, ChartContentMediaType)
		desc := func(l v1.Layer, mt types.MediaType) v1.Descriptor {
			d, _ := l.Digest()
			s, _ := l.Size()
			return v1.Descriptor{MediaType: mt, Digest: d, Size: s}
		}
		m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
			Config: desc(cfg, ChartConfigMediaType), Layers: []v1.Descriptor{desc(content, ChartContentMediaType)}}
		raw, err := json.Marshal(m)
		if err != nil {
			return pushed, err
		}
		sum := sha256.Sum256(raw)
		if d, err := remote.Head(ref, ropts...); err == nil && d.Digest.Hex == hex.EncodeToString(sum[:]) {
			pushed = append(pushed, ref.String())
			continue
		}
		for _, l := range []v1.Layer{cfg, content} {
			if err := remote.WriteLayer(ref.Context(), l, ropts...); err != nil {
				return pushed, fmt.Errorf("push chart %s to %s: %w", c.Name, ref, err)
			}
		}
		if err := remote.Put(ref, rawManifest{raw, types.OCIManifestSchema1}, ropts...); err != nil {
			return pushed, fmt.Errorf("push chart %s to %s: %w", c.Name, ref, err)
		}
		pushed = append(pushed, ref.String())
	}
	return pushed, nil
}

// chartArchive returns the chart at rel as a .tgz, and its Chart.yaml as JSON.
func (e *Loaded) chartArchive(rel string) ([]byte, []byte, error) {
	p := filepath.Join(e.Root, filepath.FromSlash(rel))
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		if fi.Size() > maxChart {
			return nil, nil, fmt.Errorf("%s is %d bytes, past the %d-byte limit for a chart", rel, fi.Size(), maxChart)
		}
		tgz, err := bounded.ReadFile(p, maxChart)
		if err != nil {
			return nil, nil, err
		}
		meta, err := chartYAMLFromArchive(tgz)
		return tgz, meta, err
	}
	chartYAML, err := bounded.ReadFile(filepath.Join(p, "Chart.yaml"), maxChart)
	if err != nil {
		return nil, nil, fmt.Errorf("%s has no Chart.yaml: %w", rel, err)
	}
	meta, err := yaml.YAMLToJSON(chartYAML)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/Chart.yaml: %w", rel, err)
	}
	var md struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(meta, &md)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, err := filepath.Rel(p, fp)
		if err != nil {
			return err
		}
		data, err := bounded.ReadFile(fp, maxChart)
		if err != nil {
			return fmt.Errorf("%s: %w", fp, err)
		}
		if b.Len()+len(data) > maxChart {
			return fmt.Errorf("%s is past the %d-byte limit for a chart", rel, maxChart)
		}
		if err := tw.WriteHeader(header(path.Join(md.Name, filepath.ToSlash(r)), int64(len(data)), false)); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	return b.Bytes(), meta, err
}

// chartYAMLFromArchive reads NAME/Chart.yaml of a chart .tgz as JSON.
func chartYAMLFromArchive(tgz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("not a chart archive: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the chart archive has no Chart.yaml")
		}
		if err != nil {
			return nil, err
		}
		if parts := strings.Split(strings.TrimPrefix(h.Name, "./"), "/"); len(parts) == 2 && parts[1] == "Chart.yaml" {
			data, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return nil, err
			}
			return yaml.YAMLToJSON(data)
		}
	}
}

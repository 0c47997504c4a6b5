package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/import/*/golden")

// testdata is the repository's testdata/import: real upstream artifacts, each
// directory with a NOTICE naming where it comes from.
const testdata = "../../../../testdata/import"

// goldenCases import the real upstream artifacts under testdata/import.
var goldenCases = []struct {
	name, source, input string
	opts                Options
	from                func(string, Options) (*Result, error)
}{
	{"podinfo", "helm", "podinfo", Options{}, FromHelm},
	{"cluster-autoscaler", "kkp", "cluster-autoscaler.yaml", Options{Charts: testdata + "/kkp/charts"}, FromKKP},
	{"nginx-cilium-test", "kkp", "nginx-cilium-test.yaml", Options{Charts: testdata + "/kkp/charts"}, FromKKP},
	{"my-plugin", "kube-aws", "my-plugin", Options{}, FromKubeAWS},
	// Its binary's url is not downloaded here: a stand-in answers with the
	// digest of stand-in bytes.
	{"aws-iam-authenticator", "kube-aws", "aws-iam-authenticator", Options{Fetch: standIn}, FromKubeAWS},
	{"kiam", "kube-aws", "kiam", Options{}, FromKubeAWS},
	{"audit", "kops", "audit/cluster.yaml", Options{}, FromKops},
	{"hooks-containerd-exec", "kops", "hooks-containerd-exec/cluster.yaml", Options{}, FromKops},
	{"expansions", "tke", "expansions", Options{}, FromTKE},
}

// standIn is Options.Fetch answering for every URL with the digest of the
// bytes "stand-in for URL".
func standIn(url string) (string, error) {
	s := sha256.Sum256([]byte("stand-in for " + url))
	return hex.EncodeToString(s[:]), nil
}

// TestGolden imports each upstream artifact and compares, per package, its
// plugin.yaml, its README and the list of its files with the golden files.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.source+"/"+c.name, func(t *testing.T) {
			res, err := c.from(filepath.Join(testdata, c.source, c.input), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{}
			for _, p := range res.Packages {
				m, err := yaml.Marshal(p.Manifest)
				if err != nil {
					t.Fatal(err)
				}
				got[p.Dir+"/plugin.yaml"] = m
				got[p.Dir+"/README.md"] = p.Report.README(p.Manifest.Metadata.Name + " " + p.Manifest.Metadata.Version)
				got[p.Dir+"/files.txt"] = []byte(strings.Join(sortedKeys(p.Files), "\n") + "\n")
			}
			if res.Report != nil {
				got[res.Catalog+"/README.md"] = res.Report.README(res.Catalog)
			}
			dir := filepath.Join(testdata, c.source, "golden", c.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			for f, data := range got {
				file := filepath.Join(dir, filepath.FromSlash(f))
				if *update {
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, data, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -update to write it)", err)
				}
				if !bytes.Equal(data, want) {
					t.Errorf("%s differs from the import (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", file, data, want)
				}
			}
		})
	}
}

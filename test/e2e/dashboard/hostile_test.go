package dashboard

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/dashboard"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// corpus is the repository's bad-input corpus (testdata/bad, the one
// pkg/cmd's lint golden test runs): a case is a directory; DIR/secret
// holds strings, one a line, that must never be shown.
const corpus = "../../../testdata/bad"

// corpusSecrets are every case's secrets.
func corpusSecrets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpus, "*", "secret"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no secrets in the corpus %s: %v", corpus, err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// caseEnv is DIR/env's NAME=value lines as an environment: all the case's
// command sees.
func caseEnv(t *testing.T, dir string) func(string) (string, bool) {
	t.Helper()
	env := map[string]string{}
	if f, err := os.Open(filepath.Join(dir, "env")); err == nil {
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				env[k] = v
			}
		}
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestHostileCorpus starts the dashboard with every cluster file of the
// bad-input corpus that loads (their values fail their schemas, their
// sensitive values are invalid, their plugins do not resolve...), with the
// corpus' plugins as a plugin directory, and reads every page: each answers,
// none fails to render, and none holds any secret of the corpus — the
// problems the pages list included.
func TestHostileCorpus(t *testing.T) {
	secrets := corpusSecrets(t)
	dirs, err := filepath.Glob(filepath.Join(corpus, "cluster-*"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := filepath.Abs(filepath.Join(corpus, "_shared", "plugins"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, dir := range dirs {
		cl, l := config.Load(filepath.Join(dir, "cluster.yaml"))
		if cl == nil || l.HasFatal() {
			continue // the CLI refuses the file before serving anything
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ran++
			cfg := &action.Config{Env: caseEnv(t, dir), NoBuiltin: true, PluginDirs: []string{shared}}
			srv, err := dashboard.New(dashboard.Options{Config: cfg, Target: action.KubeconfigTarget{RESTConfig: testcluster.RESTConfig(t)}, Cluster: cl, Logger: testcluster.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			pages := []string{"/", "/fragments/plugins", "/plan", "/plan.svg", "/catalogs"}
			for _, r := range cl.Enabled() {
				pages = append(pages, "/plugins/"+r.Name, "/fragments/plugins/"+r.Name, "/plugins/"+r.Name+"/rollback?revision=1")
			}
			c := &http.Client{Timeout: time.Minute}
			var all strings.Builder
			for _, p := range pages {
				resp, err := c.Get(hs.URL + p)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				all.Write(b)
				if resp.StatusCode >= 500 && p != "/plan.svg" || len(b) == 0 {
					t.Errorf("GET %s: %d\n%s", p, resp.StatusCode, b)
				}
				for _, s := range secrets {
					if strings.Contains(string(b), s) {
						t.Errorf("GET %s holds the corpus secret %q:\n%s", p, s, b)
					}
				}
			}
			// A case with a secret put it in play: the pages name the problem
			// with it, not its value.
			if _, err := os.Stat(filepath.Join(dir, "secret")); err == nil && !strings.Contains(all.String(), "(sensitive, not shown)") {
				t.Errorf("no page shows the problem with the sensitive value, so the check proves nothing:\n%s", all.String())
			}
		})
	}
	if ran < 10 {
		t.Errorf("only %d cluster files of the corpus loaded", ran)
	}
}

package hosts

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// siteDesired is a cluster of one worker pool under an expansion with the
// given site and hooks.
func siteDesired(site *provider.Site, hooks ...model.Hook) *provider.Desired {
	return &provider.Desired{
		Model: &model.Model{Pools: map[string]*model.Pool{
			model.ControlPlanePool: {Name: model.ControlPlanePool, Count: 1},
			"workers":              {Name: "workers", Count: 1, Hooks: hooks},
		}},
		Site: site,
	}
}

// TestCheckSite: under an expansion, what a host would fetch from the
// internet is refused by name: the expansions' images with no site registry,
// a site registry on loopback (the host's own, not this machine's) or not
// host:port, a node hook downloading its script from a URL.
func TestCheckSite(t *testing.T) {
	used := []string{"site 1.0.0 from exp/site.tar"}
	urlHook := model.Hook{Name: "fetch", By: "tools", At: "beforeNodeup", URL: "https://tools.example.com/setup.sh", SHA256: strings.Repeat("a", 64)}
	scriptHook := model.Hook{Name: "local", By: "tools", At: "beforeNodeup", Script: "#!/bin/sh\ntrue\n"}
	for _, tc := range []struct {
		name string
		d    *provider.Desired
		want []string // empty: accepted
	}{
		{"no expansion", siteDesired(nil, urlHook), nil},
		{"site registry", siteDesired(&provider.Site{Expansions: used, Images: []string{"example.com/app:v1"}, Registry: "10.0.0.1:5000", PlainHTTP: true}, scriptHook), nil},
		{"expansion without images nor registry", siteDesired(&provider.Site{Expansions: used}), nil},
		{"images without a site registry", siteDesired(&provider.Site{Expansions: used, Images: []string{"a.example/x:1", "b.example/y:1", "c.example/z:1", "d.example/w:1"}}),
			[]string{"expansions site 1.0.0 from exp/site.tar carry images (a.example/x:1, b.example/y:1, c.example/z:1 and 1 more)", "pass --site-registry HOST:PORT"}},
		{"loopback registry", siteDesired(&provider.Site{Expansions: used, Registry: "127.0.0.1:5000"}), []string{"--site-registry 127.0.0.1:5000 is on loopback"}},
		{"localhost registry", siteDesired(&provider.Site{Expansions: used, Registry: "localhost:5000"}), []string{"--site-registry localhost:5000 is on loopback"}},
		{"not host:port", siteDesired(&provider.Site{Expansions: used, Registry: "registry.site/path"}), []string{"--site-registry registry.site/path: expected HOST:PORT"}},
		{"url hook", siteDesired(&provider.Site{Expansions: used, Registry: "10.0.0.1:5000"}, scriptHook, urlHook),
			[]string{"node pool workers: hook tools/fetch downloads its script from https://tools.example.com/setup.sh on the host", "make it a script hook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSite(tc.d)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestUpRefusesBeforeTouchingAHost: the refusal comes before any host is
// reached.
func TestUpRefusesBeforeTouchingAHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	keyFile, _ := clientKey(t)
	cp := testHost(t, l.Addr().String(), keyFile)
	cp.Node, cp.Pool = "control-plane-0", model.ControlPlanePool
	w := testHost(t, l.Addr().String(), keyFile)
	p := &Provider{opts: Options{Parallel: 2, StateDir: t.TempDir(), Events: func(provider.Event) {}, Logger: slog.New(slog.DiscardHandler)},
		keys: &hostKeys{file: filepath.Join(t.TempDir(), "known_hosts"), acceptNew: true}, timeouts: defaultTimeouts, hosts: []*Host{cp, w}}
	d := siteDesired(&provider.Site{Expansions: []string{"site 1.0.0 from exp/site.tar"}, Images: []string{"example.com/app:v1"}})
	if _, err := p.Up(context.Background(), d); err == nil || !strings.Contains(err.Error(), "no --site-registry is given") {
		t.Fatalf("Up = %v, want the expansions' images refused without a site registry", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connection(s) to the hosts before the refusal", n)
	}
}

// TestSiteFiles: the site registry's containerd configuration (its own host
// directory, so the host's registry mirror is not asked for its images),
// under /etc/containerd, which down removes.
func TestSiteFiles(t *testing.T) {
	if fs := siteFiles(nil); fs != nil {
		t.Errorf("no site: %d files", len(fs))
	}
	if fs := siteFiles(&provider.Site{Expansions: []string{"x"}}); fs != nil {
		t.Errorf("no site registry: %d files", len(fs))
	}
	for _, tc := range []struct {
		plain bool
		want  string
	}{{true, `server = "http://10.0.0.1:5000"`}, {false, `server = "https://10.0.0.1:5000"`}} {
		fs := siteFiles(&provider.Site{Registry: "10.0.0.1:5000", PlainHTTP: tc.plain})
		if len(fs) != 1 || fs[0].Path != "/etc/containerd/certs.d/10.0.0.1:5000/hosts.toml" || fs[0].Mode != 0o644 {
			t.Fatalf("site files = %+v", fs)
		}
		if got := string(fs[0].content); !strings.Contains(got, tc.want+"\n") || strings.Contains(got, registryAddr) {
			t.Errorf("hosts.toml (plain HTTP %v):\n%s\nwant %s, and not the host's own registry", tc.plain, got, tc.want)
		}
	}
	// down removes every delivered file and containerd's configuration.
	if !strings.Contains(cleanScript, " /etc/containerd ") {
		t.Error("down's clean script does not remove /etc/containerd")
	}
}

// TestWriteFilesFromAURLRefused: the interpreter of the pool's file never
// lets a host download a file (cloud-init's write_files source); a URL node
// file reaches it as content, fetched on kubeplug's machine (from the
// expansion's urlfiles first) and delivered over SSH.
func TestWriteFilesFromAURLRefused(t *testing.T) {
	_, err := parseCloudConfig("nodes/workers/cloud-init.yaml", []byte("#cloud-config\nwrite_files:\n  - path: /usr/local/bin/tool\n    source: {uri: https://tools.example.com/tool}\n"))
	if err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("err = %v, want write_files' source refused by name", err)
	}
}

// TestSiteAddedRolls: an expansion's site registry added to a running
// cluster is a changed delivered file, so the host is rolled (containerd
// restarted with it); removed, the file is among those the roll removes.
func TestSiteAddedRolls(t *testing.T) {
	a := memFile("/etc/a", 0o644, "", []byte("a"))
	was := map[string]string{"/etc/a": a.SHA256}
	site := siteFiles(&provider.Site{Registry: "10.0.0.1:5000", PlainHTTP: true})
	ch, rm := diffDelivered(was, append([]*bootFile{a}, site...))
	if len(ch) != 1 || ch[0] != site[0].Path || rm != nil {
		t.Fatalf("site added: changed %v, removed %v; want %s changed", ch, rm, site[0].Path)
	}
	if got := restarts(ch); len(got) != 1 || got[0] != "containerd.service" {
		t.Errorf("restarts = %v, want containerd.service", got)
	}
	was[site[0].Path] = site[0].SHA256
	if ch, rm = diffDelivered(was, []*bootFile{a}); ch != nil || len(rm) != 1 || rm[0] != site[0].Path {
		t.Errorf("site removed: changed %v, removed %v; want %s removed", ch, rm, site[0].Path)
	}
}

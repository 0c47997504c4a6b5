package hosts

import (
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// An air-gapped site (provider.Desired.Site, set when the run uses
// expansions): the hosts get what the cluster needs from kubeplug's machine
// over SSH (the node programs, the built-in images, the expansions' node
// files and URL files, rendered into the pool's file) and from the site
// registry (every image of the rendered objects, rewritten to it), never from
// the internet. What a host would still fetch from the internet is refused
// before any host is touched (checkSite).

// certsDir is containerd's directory of registry host configurations
// (files/containerd-config.toml's config_path).
const certsDir = "/etc/containerd/certs.d"

// siteRegistryFile is the registry host configuration that points the hosts'
// containerd at the site registry.
func siteRegistryFile(registry string) string {
	return path.Join(certsDir, registry, "hosts.toml")
}

// checkSite refuses, naming each, what a host would fetch from the internet
// under the expansions of site: the expansions' images without a site
// registry (nothing else would serve them: the host's own registry holds
// only what the provider pushes), a site registry the hosts cannot reach
// (loopback: this machine's, not theirs), and a node hook whose script the
// node agent downloads from a URL. Nil without a site.
func checkSite(d *provider.Desired) error {
	s := d.Site
	if s == nil {
		return nil
	}
	var errs []error
	used := strings.Join(s.Expansions, ", ")
	switch {
	case s.Registry == "" && len(s.Images) > 0:
		errs = append(errs, fmt.Errorf("expansions %s carry images (%s) and no --site-registry is given: the hosts would pull them from their registries on the internet; the hosts provider pulls an expansion's images from a site registry: pass --site-registry HOST:PORT, an address the hosts reach (and --site-registry-plain-http for plain HTTP)", used, shortList(s.Images, 3)))
	case s.Registry != "":
		if err := checkSiteRegistry(s.Registry); err != nil {
			errs = append(errs, err)
		}
	}
	if d.Model != nil {
		for _, pool := range slices.Sorted(mapKeys(d.Model.Pools)) {
			for _, h := range d.Model.Pools[pool].Hooks {
				if h.URL != "" {
					errs = append(errs, fmt.Errorf("node pool %s: hook %s/%s downloads its script from %s on the host when it runs; under expansions (%s) nothing is fetched from the internet: make it a script hook (the script travels in the pool's file over SSH)", pool, h.By, h.Name, h.URL, used))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkSiteRegistry refuses a --site-registry the hosts cannot use: not
// host:port, or on loopback (the hosts' own loopback is not this machine's;
// their own registry listens there).
func checkSiteRegistry(reg string) error {
	host, port, err := net.SplitHostPort(reg)
	if err != nil || host == "" || port == "" || strings.ContainsAny(reg, "/ ") {
		return fmt.Errorf("--site-registry %s: expected HOST:PORT, the registry the hosts pull the site's images from", reg)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return fmt.Errorf("--site-registry %s is on loopback: each host would reach its own, not this machine's; run the site registry on an address the hosts reach", reg)
	}
	return nil
}

// siteFiles are the host's files for the site's registry: containerd's
// configuration of that registry host, which pulls its images from it alone
// (plain HTTP, or HTTPS trusted through the host's certificate store), not
// through the host's own registry (the _default mirror). None without a site
// registry.
func siteFiles(s *provider.Site) []*bootFile {
	if s == nil || s.Registry == "" {
		return nil
	}
	scheme := "https://"
	if s.PlainHTTP {
		scheme = "http://"
	}
	conf := fmt.Sprintf("# kubeplug: the site registry of the expansions in use (--site-registry).\nserver = %q\n", scheme+s.Registry)
	return []*bootFile{memFile(siteRegistryFile(s.Registry), 0o644, "", []byte(conf))}
}

// shortList is the first n of items, then how many more.
func shortList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

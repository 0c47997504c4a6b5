package controller

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

// sitePolicy is a resource's spec.expansionSite and how its messages name it.
type sitePolicy struct {
	site *ctrlv1.ExpansionSite
	// where names the resource ("the installation", "ManagedCluster NS/NAME").
	where string
	// fileAllow is the cluster file's own spec.expansions.allow (a
	// ManagedCluster's), at fileWhere; used when site sets no allowlist.
	fileAllow *v1alpha1.ExpansionAllow
	fileWhere string
}

// siteOf sets p's site registry use and allowlist from sp, reading the
// registry's CA and credentials from their Secrets; it returns what
// identifies them, for the digest. A missing Secret or key, or a CA or
// credentials that do not parse, is a specError naming the field.
func (c *Controller) siteOf(ctx context.Context, cl client.Client, ns string, sp sitePolicy, p *passing) (string, error) {
	p.allow, p.allowWhere, p.allowField = sp.fileAllow, sp.fileWhere, "spec.expansions.allow"
	site := sp.site
	if site == nil {
		return "", nil
	}
	var stamp strings.Builder
	if a := site.Allow; a != nil {
		p.allow = &v1alpha1.ExpansionAllow{SkipSteps: a.SkipSteps, SkipConditions: a.SkipConditions, DelegateConditions: a.DelegateConditions}
		p.allowWhere, p.allowField = sp.where, "spec.expansionSite.allow"
		b, _ := json.Marshal(a)
		fmt.Fprintf(&stamp, "allow=%s\n", b)
	}
	reg := site.Registry
	if reg == nil {
		return stamp.String(), nil
	}
	if err := validRegistryAddress(reg.Address); err != nil {
		return "", specErrorf("spec.expansionSite.registry.address: %v", err)
	}
	p.site.SiteRegistry, p.site.SiteRegistryPlainHTTP = reg.Address, reg.PlainHTTP
	fmt.Fprintf(&stamp, "registry=%s plain=%v\n", reg.Address, reg.PlainHTTP)
	if reg.CASecret != nil {
		key := reg.CASecret.Key
		if key == "" {
			key = "ca.crt"
		}
		pem, version, err := secretKey(ctx, cl, ns, reg.CASecret.Name, key, "spec.expansionSite.registry.caSecret")
		if err != nil {
			return "", err
		}
		pool := oci.SystemRoots()
		if !pool.AppendCertsFromPEM(pem) {
			return "", specErrorf("spec.expansionSite.registry.caSecret: Secret %s key %q holds no PEM certificate", reg.CASecret.Name, key)
		}
		p.site.SiteRegistryRemote = append(p.site.SiteRegistryRemote, remote.WithTransport(oci.TransportTrusting(pool)))
		fmt.Fprintf(&stamp, "ca=%s@%s/%s\n", reg.CASecret.Name, version, key)
	}
	if name := reg.CredentialsSecret; name != "" {
		b, version, err := secretKey(ctx, cl, ns, name, corev1.DockerConfigJsonKey, "spec.expansionSite.registry.credentialsSecret")
		if err != nil {
			return "", err
		}
		auth, err := registryAuth(b, reg.Address)
		if err != nil {
			return "", specErrorf("spec.expansionSite.registry.credentialsSecret: Secret %s: %v", name, err)
		}
		p.site.SiteRegistryRemote = append(p.site.SiteRegistryRemote, remote.WithAuth(auth))
		fmt.Fprintf(&stamp, "credentials=%s@%s\n", name, version)
	}
	return stamp.String(), nil
}

// validRegistryAddress checks that addr is HOST[:PORT], as image names
// take it: the rewritten names are HOST[:PORT]/....
func validRegistryAddress(addr string) error {
	if strings.ContainsAny(addr, "/@ ") || addr == "" {
		return fmt.Errorf("%q is not HOST[:PORT] (no scheme, path or user)", addr)
	}
	if got := expansion.RewriteImage("example.com/x:1", addr); !strings.HasPrefix(got, addr+"/") {
		return fmt.Errorf("%q is not HOST[:PORT]", addr)
	}
	return nil
}

// secretKey reads key of Secret name and the Secret's resource version.
func secretKey(ctx context.Context, cl client.Client, ns, name, key, field string) ([]byte, string, error) {
	sec := &corev1.Secret{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", specErrorf("%s: Secret %s does not exist", field, name)
		}
		return nil, "", err
	}
	b, ok := sec.Data[key]
	if !ok {
		return nil, "", specErrorf("%s: Secret %s has no key %q", field, name, key)
	}
	return b, sec.ResourceVersion, nil
}

// registryAuth reads the credentials for host from a .dockerconfigjson.
func registryAuth(b []byte, host string) (authn.Authenticator, error) {
	var cfg struct {
		Auths map[string]struct {
			Username string `json:"username"`
			Password string `json:"password"`
			Auth     string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("key %s: %w", corev1.DockerConfigJsonKey, err)
	}
	for k, a := range cfg.Auths {
		k = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://"), "/")
		if k != host {
			continue
		}
		if a.Username == "" && a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("auths[%q].auth: %w", k, err)
			}
			a.Username, a.Password, _ = strings.Cut(string(raw), ":")
		}
		return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password}), nil
	}
	return nil, fmt.Errorf("key %s has no credentials for %s", corev1.DockerConfigJsonKey, host)
}

// skipsOf is what an expansion skips or delegates, for its status.
func skipsOf(pkg *expansion.Package) []string {
	if pkg.Manifest == nil {
		return nil
	}
	s := pkg.Manifest.Spec
	var out []string
	for _, st := range s.SkipSteps {
		out = append(out, "step "+st)
	}
	for _, c := range s.SkipConditions {
		out = append(out, "check "+c)
	}
	for _, d := range s.DelegateConditions {
		out = append(out, "check "+d.Check+" delegated to operator "+d.Operator)
	}
	return out
}

// expansionRefs are the index entries (refsIndex) of a resource's
// expansions: their keys' ConfigMaps and the site registry's Secrets, whose
// changes reconcile it.
func expansionRefs(refs []ctrlv1.ExpansionRef, site *ctrlv1.ExpansionSite) []string {
	var out []string
	for _, e := range refs {
		out = append(out, ref("ConfigMap", e.VerifyKeys))
	}
	if site == nil || site.Registry == nil {
		return out
	}
	if s := site.Registry.CASecret; s != nil {
		out = append(out, ref("Secret", s.Name))
	}
	if s := site.Registry.CredentialsSecret; s != "" {
		out = append(out, ref("Secret", s))
	}
	return out
}

package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// maxPassedExpansion bounds one expansion the controller pulls.
const maxPassedExpansion = 64 << 30

// passing is what an installation passes to its target of its
// spec.expansions: nothing when it has none or pass-through is suspended
// (suspendedBy says by which field).
type passing struct {
	refs []ctrlv1.ExpansionRef
	// keys are the key files of each ref's verifyKeys, written by unpack.
	keys        [][]string
	keyMaps     []string
	suspendedBy string
	// stamp identifies what is passed, for the installation's digest.
	stamp string
	// site is the site registry's use (address, CA, credentials), for the
	// run's action.ExpansionUse.
	site action.ExpansionUse
	// allow is the site's allowlist (nil allows everything), at allowField
	// of allowWhere.
	allow                  *v1alpha1.ExpansionAllow
	allowWhere, allowField string
}

// passingOf reads the keys an installation's spec.expansions name, or says
// that pass-through is suspended, by the installation or by its target.
func (c *Controller) passingOf(ctx context.Context, cl client.Client, ns string, spec *ctrlv1.PluginInstallationSpec, tg *target) (*passing, unpacks, error) {
	suspendedBy := ""
	switch {
	case spec.SuspendExpansions:
		suspendedBy = "spec.suspendExpansions of the installation"
	case tg.object != nil && tg.object.Spec.SuspendExpansions:
		suspendedBy = fmt.Sprintf("spec.suspendExpansions of TargetCluster %s/%s", tg.object.Namespace, tg.object.Name)
	}
	return c.passingRefs(ctx, cl, ns, spec.Expansions, suspendedBy, sitePolicy{site: spec.ExpansionSite, where: "the installation"})
}

// passingRefs reads the keys and the site of refs, a resource's
// spec.expansions, unless suspendedBy says pass-through is suspended.
func (c *Controller) passingRefs(ctx context.Context, cl client.Client, ns string, refs []ctrlv1.ExpansionRef, suspendedBy string, sp sitePolicy) (*passing, unpacks, error) {
	p := &passing{}
	if len(refs) == 0 {
		return p, nil, nil
	}
	if suspendedBy != "" {
		p.suspendedBy, p.stamp = suspendedBy, "suspended"
		return p, nil, nil
	}
	var pending unpacks
	var stamp strings.Builder
	for i, e := range refs {
		field := fmt.Sprintf("spec.expansions[%d]", i)
		if _, err := oci.ParseRef(e.Ref); err != nil {
			return nil, nil, specErrorf("%s.ref: %v", field, err)
		}
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: e.VerifyKeys}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, specErrorf("%s.verifyKeys: ConfigMap %s does not exist", field, e.VerifyKeys)
			}
			return nil, nil, err
		}
		files, u := c.unpack(filepath.Join("keys", ns, cm.Name+"@"+cm.ResourceVersion), textData(cm.Data), cm.BinaryData)
		if len(files) == 0 {
			return nil, nil, specErrorf("%s.verifyKeys: ConfigMap %s holds no keys", field, e.VerifyKeys)
		}
		pending = append(pending, u)
		p.refs = append(p.refs, e)
		p.keys = append(p.keys, files)
		p.keyMaps = append(p.keyMaps, ns+"/"+cm.Name)
		fmt.Fprintf(&stamp, "%s keys=%s@%s\n", e.Ref, cm.Name, cm.ResourceVersion)
	}
	siteStamp, err := c.siteOf(ctx, cl, ns, sp, p)
	if err != nil {
		return nil, nil, err
	}
	p.stamp = stamp.String() + siteStamp
	return p, pending, nil
}

// pull fetches and verifies every expansion passed, each against its own
// keys, and returns the configuration that merges them into an apply and
// what the status says of them. An expansion not signed by one of its keys is
// a specError naming the reference and the keys tried; nothing is applied.
func (c *Controller) pull(ctx context.Context, p *passing, target string) (action.ExpansionUse, []ctrlv1.AppliedExpansion, error) {
	var use action.ExpansionUse
	var applied []ctrlv1.AppliedExpansion
	if len(p.refs) == 0 {
		return use, nil, nil
	}
	oc, err := oci.New(oci.Options{})
	if err != nil {
		return use, nil, err
	}
	for i, e := range p.refs {
		field := fmt.Sprintf("spec.expansions[%d]", i)
		keys, err := readKeys(p.keys[i])
		if err != nil {
			return use, nil, specErrorf("%s.verifyKeys: ConfigMap %s: %v", field, p.keyMaps[i], err)
		}
		dir := filepath.Join(c.opts.WorkDir, "expansions", refDir(e.Ref))
		pulled, err := oc.PullExpansion(ctx, e.Ref, dir, maxPassedExpansion)
		if err != nil {
			return use, nil, fmt.Errorf("%s: %w", field, err)
		}
		pkg, l := expansion.Open(ctx, pulled.File, expansion.Limits{})
		if pkg == nil || l.HasFatal() {
			return use, nil, specErrorf("%s: expansion %s: %s", field, e.Ref, l.Err())
		}
		v, vl := pkg.Verify(keys)
		if vl.HasFatal() {
			return use, nil, specErrorf("%s: expansion %s from %s is refused: %s (trusted keys: ConfigMap %s)", field, pkg.Name(), e.Ref, strings.TrimSpace(vl.Err().Error()), p.keyMaps[i])
		}
		if pulled.Digest != "" && pulled.Digest != v.Digest {
			return use, nil, specErrorf("%s: expansion %s from %s has digest %s, but the artifact announces %s", field, pkg.Name(), e.Ref, v.Digest, pulled.Digest)
		}
		if al := pkg.CheckAllowedAt(p.allow, p.allowWhere, p.allowField); al.HasFatal() {
			return use, nil, specErrorf("%s: expansion %s from %s is refused: %s", field, pkg.Name(), e.Ref, strings.TrimSpace(al.Err().Error()))
		}
		use.Dirs = append(use.Dirs, dir)
		use.Keys = append(use.Keys, p.keys[i]...)
		applied = append(applied, ctrlv1.AppliedExpansion{
			Ref: e.Ref, Manifest: pulled.Manifest, Name: pkg.Manifest.Metadata.Name, Version: pkg.Manifest.Metadata.Version,
			Digest: v.Digest, SignedBy: v.KeyID, Target: target, Skips: skipsOf(pkg),
		})
	}
	use.SiteRegistry, use.SiteRegistryPlainHTTP, use.SiteRegistryRemote = p.site.SiteRegistry, p.site.SiteRegistryPlainHTTP, p.site.SiteRegistryRemote
	return use, applied, nil
}

// refDir is the work directory's place for what ref names: one per
// reference, so two installations passing the same one share it.
func refDir(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:12])
}

// readKeys loads public key files.
func readKeys(files []string) ([]*sign.PublicKey, error) {
	var keys []*sign.PublicKey
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		k, err := sign.LoadPublicKey(filepath.Base(f), b)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// passedMessage says, for the Ready condition, which expansions were merged
// into the apply, or why none was.
func passedMessage(p *passing, applied []ctrlv1.AppliedExpansion) string {
	switch {
	case p == nil:
		return ""
	case p.suspendedBy != "":
		return "; expansions not passed: suspended by " + p.suspendedBy
	case len(applied) == 0:
		return ""
	}
	names := make([]string, 0, len(applied))
	for _, a := range applied {
		names = append(names, fmt.Sprintf("%s %s (%s, signed by %s)", a.Name, a.Version, a.Ref, a.SignedBy))
	}
	return "; with expansion(s) " + strings.Join(names, ", ")
}

package deploy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Phases of an inventory.
const (
	PhaseApplying = "Applying"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
)

// inventoryKey is the ConfigMap key holding the gzipped JSON inventory: gzip keeps a
// plugin with thousands of objects far below the 1 MiB object limit.
const inventoryKey = "inventory.json.gz"

// LabelInventory marks inventory ConfigMaps.
const LabelInventory = "kubeplug.dev/inventory"

// Inventory is what kubeplug knows it applied for one plugin.
type Inventory struct {
	Plugin       string   `json:"plugin"`
	Version      string   `json:"version"`
	ValuesDigest string   `json:"valuesDigest,omitempty"`
	Requires     []string `json:"requires,omitempty"`
	Objects      []ObjRef `json:"objects"`
	// Releases are the plugin's Helm releases; their objects are in Objects too.
	Releases []ReleaseRef `json:"releases,omitempty"`
	// Phase is Applying while an apply runs (the objects are then old ∪ new), Ready
	// after one succeeded, Failed after one failed.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}

func (inv *Inventory) refs() []ObjRef {
	if inv == nil {
		return nil
	}
	return inv.Objects
}

func (inv *Inventory) releases() []ReleaseRef {
	if inv == nil {
		return nil
	}
	return inv.Releases
}

func releaseRefs(rels []HelmRelease) []ReleaseRef {
	out := make([]ReleaseRef, 0, len(rels))
	for _, r := range rels {
		out = append(out, ReleaseRef{Namespace: r.Namespace, Name: r.Name})
	}
	slices.SortFunc(out, func(a, b ReleaseRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// unionReleases returns a ∪ b, sorted.
func unionReleases(a, b []ReleaseRef) []ReleaseRef {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ReleaseRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func inventoryName(plugin string) string { return "kubeplug-inventory-" + plugin }

func (d *Deployer) ensureNamespace(ctx context.Context) error {
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: d.opts.Namespace, Labels: map[string]string{LabelManagedBy: FieldManager},
		}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// readInventory returns the plugin's inventory, or nil when it has none.
func (d *Deployer) readInventory(ctx context.Context, plugin string) (*Inventory, error) {
	var cm *corev1.ConfigMap
	err := d.retry(ctx, func(ctx context.Context) error {
		var err error
		cm, err = d.core.CoreV1().ConfigMaps(d.opts.Namespace).Get(ctx, inventoryName(plugin), metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the inventory of %s: %w", plugin, err)
	}
	return decodeInventory(cm)
}

func decodeInventory(cm *corev1.ConfigMap) (*Inventory, error) {
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[inventoryKey]))
	if err != nil {
		return nil, fmt.Errorf("inventory %s/%s is corrupt: %w", cm.Namespace, cm.Name, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("inventory %s/%s is corrupt: %w", cm.Namespace, cm.Name, err)
	}
	inv := &Inventory{}
	if err := json.Unmarshal(raw, inv); err != nil {
		return nil, fmt.Errorf("inventory %s/%s is corrupt: %w", cm.Namespace, cm.Name, err)
	}
	return inv, nil
}

// writeInventory stores the inventory with server-side apply, so concurrent writers
// of different plugins never conflict.
func (d *Deployer) writeInventory(ctx context.Context, inv *Inventory) error {
	raw, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("encode the inventory of %s: %w", inv.Plugin, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return fmt.Errorf("compress the inventory of %s: %w", inv.Plugin, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress the inventory of %s: %w", inv.Plugin, err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": inventoryName(inv.Plugin), "namespace": d.opts.Namespace,
			"labels": map[string]any{LabelInventory: "true", LabelPlugin: inv.Plugin, LabelManagedBy: FieldManager},
			"annotations": map[string]any{
				"kubeplug.dev/version": inv.Version, "kubeplug.dev/phase": inv.Phase, "kubeplug.dev/objects": fmt.Sprint(len(inv.Objects)),
			},
		},
		"binaryData": map[string]any{inventoryKey: buf.Bytes()},
	}}
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(d.opts.Namespace).
			Apply(ctx, cm.GetName(), cm, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("write the inventory of %s: %w", inv.Plugin, err)
		}
		return nil
	})
}

func (d *Deployer) setPhase(ctx context.Context, plugin, phase, msg string) error {
	inv, err := d.readInventory(ctx, plugin)
	if err != nil || inv == nil {
		return err
	}
	inv.Phase, inv.Message = phase, msg
	return d.writeInventory(ctx, inv)
}

// Inventories returns every plugin's inventory, by plugin name.
func (d *Deployer) Inventories(ctx context.Context) ([]*Inventory, error) {
	var list *corev1.ConfigMapList
	err := d.retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = d.core.CoreV1().ConfigMaps(d.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInventory + "=true"})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list inventories: %w", err)
	}
	var out []*Inventory
	for i := range list.Items {
		inv, err := decodeInventory(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	slices.SortFunc(out, func(a, b *Inventory) int {
		if a.Plugin < b.Plugin {
			return -1
		}
		if a.Plugin > b.Plugin {
			return 1
		}
		return 0
	})
	return out, nil
}

func (d *Deployer) deleteInventory(ctx context.Context, plugin string) error {
	return d.retry(ctx, func(ctx context.Context) error {
		err := d.core.CoreV1().ConfigMaps(d.opts.Namespace).Delete(ctx, inventoryName(plugin), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func refsOf(objs []*unstructured.Unstructured) []ObjRef {
	out := make([]ObjRef, len(objs))
	for i, o := range objs {
		out[i] = refOf(o)
	}
	return out
}

func union(a, b []ObjRef) []ObjRef {
	seen := map[string]bool{}
	var out []ObjRef
	for _, r := range append(slices.Clone(a), b...) {
		if !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, r)
		}
	}
	return sortedRefs(out)
}

// minus returns the refs of a that b does not have.
func minus(a, b []ObjRef) []ObjRef {
	in := map[string]bool{}
	for _, r := range b {
		in[r.key()] = true
	}
	var out []ObjRef
	for _, r := range a {
		if !in[r.key()] {
			out = append(out, r)
		}
	}
	return out
}

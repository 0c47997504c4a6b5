package controller

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
)

// A ManagedCluster's state directory (its PKI, the nodes' identities and
// tokens, the accepted host keys) is kept in the management cluster, in the
// Secret <name>-state (key stateKey, a tar.gz), written after every up, so
// that a controller that restarts — or another replica — runs up again on the
// same PKI instead of making a new one.
const stateKey = "state.tar.gz"

// maxState bounds the state Secret's archive (a Secret holds at most 1 MiB).
const maxState = 900 << 10

func stateSecretName(name string) string { return name + "-state" }

// notKept are the files of the state directory that are not kept: the key
// comes from its own Secret, the lock is this process's.
var notKept = map[string]bool{"ssh-key": true, "lock": true}

// packState is dir as a tar.gz of its regular files.
func packState(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || notKept[rel] {
			return err
		}
		b, err := os.ReadFile(path) //nolint:gosec // the controller's own state directory
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err := errors.Join(err, tw.Close(), zw.Close()); err != nil {
		return nil, err
	}
	if buf.Len() > maxState {
		return nil, fmt.Errorf("the cluster's state is %d bytes, more than a Secret holds (%d)", buf.Len(), maxState)
	}
	return buf.Bytes(), nil
}

// unpackState writes the files of a packed state into dir; names that leave
// dir and anything but regular files are refused.
func unpackState(b []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	tr := tar.NewReader(io.LimitReader(zr, 16<<20))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			return fmt.Errorf("%q: not a file of the state directory", h.Name)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
}

// restoreState fills a new state directory from the ManagedCluster's state
// Secret, when there is one; a directory that exists is this process's, current.
func (r *clusterReconciler) restoreState(ctx context.Context, obj *ctrlv1.ManagedCluster, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil // this process's: current
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	sec := &corev1.Secret{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: stateSecretName(obj.Name)}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !ownedBy(sec, obj):
		return fmt.Errorf("the Secret %s/%s is not ManagedCluster %s's state: delete or rename it", obj.Namespace, sec.Name, obj.Name)
	}
	if err := unpackState(sec.Data[stateKey], dir); err != nil {
		_ = os.RemoveAll(dir) // read again next time
		return fmt.Errorf("the cluster's state in Secret %s/%s: %w", obj.Namespace, sec.Name, err)
	}
	return nil
}

// saveState writes the state directory to the ManagedCluster's state Secret.
func (r *clusterReconciler) saveState(ctx context.Context, obj *ctrlv1.ManagedCluster, dir string) error {
	b, err := packState(dir)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: stateSecretName(obj.Name)}}
	_, err = controllerutil.CreateOrPatch(ctx, r.client, sec, func() error {
		if !ownedBy(sec, obj) && !sec.CreationTimestamp.IsZero() {
			return &targetTakenError{fmt.Sprintf("Secret %s/%s exists and is not ManagedCluster %s's state: delete or rename it", obj.Namespace, sec.Name, obj.Name)}
		}
		sec.OwnerReferences = []metav1.OwnerReference{ownerRef(obj)}
		sec.Data = map[string][]byte{stateKey: b}
		return nil
	})
	return err
}

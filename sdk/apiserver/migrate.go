package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// migrateStorage moves the objects an earlier sdk/apiserver kept as
// ConfigMaps (under the current naming or the earlier hashed one) into
// Secrets, so that a plugin upgrade keeps the objects its API already holds:
// each is written again as the Secret of cmName, keeping its uid and
// creation time (annotations) and its labels, and the ConfigMap is deleted
// (only that one: a UID precondition). Run when the server starts; a re-run
// after an interruption finishes the move.
func (s *store) migrateStorage(ctx context.Context, resources []Resource) error {
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	for _, r := range resources {
		opts := metav1.ListOptions{LabelSelector: s.selector(r, ""), Limit: 500}
		for {
			list, err := cms.List(ctx, opts)
			if err != nil {
				return fmt.Errorf("apiserver: list the ConfigMap storage of %s to move it to Secrets: %w", r.Plural, err)
			}
			for i := range list.Items {
				cm := &list.Items[i]
				u, err := decodeObject("ConfigMap", &cm.ObjectMeta, []byte(cm.Data[dataKeyObject]))
				if err != nil {
					return err
				}
				u.SetResourceVersion("")
				next, err := s.encode(r, u)
				if err != nil {
					return err
				}
				if _, err := s.secrets().Create(ctx, next, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("apiserver: move %s %s/%s from ConfigMap %s to Secret %s: %w", r.Kind, u.GetNamespace(), u.GetName(), cm.Name, next.Name, err)
				}
				uid := cm.UID
				if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("apiserver: remove the old ConfigMap storage %s of %s %s/%s: %w", cm.Name, r.Kind, u.GetNamespace(), u.GetName(), err)
				}
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return nil
}

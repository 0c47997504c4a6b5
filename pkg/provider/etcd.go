package provider

import (
	"context"
	"time"
)

// EtcdSnapshotter is implemented by a provider that can write a snapshot of a
// running cluster's etcd (`kubeplug etcd snapshot`), which its Up can bring
// the cluster back from.
type EtcdSnapshotter interface {
	// SnapshotEtcd writes a verified snapshot of the running cluster's etcd,
	// with the cluster's identity, to file, replacing file only once it is
	// complete. It returns an error wrapping ErrNotRunning when the cluster
	// does not run; cancelling ctx stops the transfer and leaves file as it
	// was.
	SnapshotEtcd(ctx context.Context, file string) (*EtcdSnapshot, error)
}

// EtcdSnapshot describes a snapshot SnapshotEtcd wrote.
type EtcdSnapshot struct {
	File              string    `json:"file"`
	Cluster           string    `json:"cluster"`
	CAFingerprint     string    `json:"caFingerprint"`
	KubernetesVersion string    `json:"kubernetesVersion,omitempty"`
	EtcdVersion       string    `json:"etcdVersion,omitempty"`
	Taken             time.Time `json:"taken"`
	// Revision and Keys are etcd's revision and key count in the snapshot.
	Revision int64 `json:"revision"`
	Keys     int   `json:"keys"`
	// Size and SHA256 are those of etcd's data in the file.
	Size     int64         `json:"size"`
	SHA256   string        `json:"sha256"`
	Duration time.Duration `json:"duration"`
}

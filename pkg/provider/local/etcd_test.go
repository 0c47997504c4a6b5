package local

import (
	"bytes"
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
)

// A snapshot file is read back only whole: a truncated, corrupt, padded or
// foreign file is an error naming the file and what is wrong.
func TestReadSnapshotRefuses(t *testing.T) {
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := clusterpki.EnsurePKI(pki, net.ParseIP("10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	id, err := readIdentity(pki)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := caFingerprint(pki)
	if err != nil {
		t.Fatal(err)
	}
	// etcd's part: anything with etcd's sha256 trailer.
	body := bytes.Repeat([]byte("etcd"), 128)
	sum := sha256.Sum256(body)
	db := filepath.Join(dir, "db")
	if err := os.WriteFile(db, append(body, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	size, digest, err := verifyEtcdChecksum(db)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.snap")
	h := &SnapshotHeader{Cluster: "demo", CAFingerprint: fp, Taken: time.Now(), Size: size, SHA256: digest, Identity: id}
	if err := writeSnapshotFile(good, h, db); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(good); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file mode: %v %v", info.Mode(), err)
	}
	out := filepath.Join(dir, "out.db")
	got, err := ReadSnapshot(good, out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "demo" || got.CAFingerprint != fp {
		t.Errorf("header: %+v", got)
	}
	if a, b := mustRead(t, db), mustRead(t, out); !bytes.Equal(a, b) {
		t.Error("etcd's part read back differs")
	}
	whole := mustRead(t, good)
	bad := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(whole)
	flipped[len(flipped)-40] ^= 0xff
	otherCA := bytes.Replace(whole, []byte(fp), []byte("sha256:"+strings.Repeat("0", 64)), 1)
	for _, c := range []struct {
		name, file, want string
	}{
		{"truncated", bad("truncated.snap", whole[:len(whole)-100]), "truncated.snap is truncated: it holds 444 bytes of etcd data, its header says 544"},
		{"header cut", bad("cut.snap", whole[:60]), "cut.snap: truncated or corrupt header"},
		{"corrupt", bad("corrupt.snap", flipped), "corrupt.snap is corrupt: its etcd data has sha256"},
		{"padded", bad("padded.snap", append(bytes.Clone(whole), 'x')), "padded.snap: more etcd data than the 544 bytes its header says"},
		{"not one", bad("other.txt", []byte("hello\n")), "other.txt: not a kubeplug etcd snapshot"},
		{"CA not its own", bad("ca.snap", otherCA), "ca.snap: the CA in its header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadSnapshot(c.file, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

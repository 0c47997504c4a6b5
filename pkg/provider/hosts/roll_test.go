package hosts

import (
	"reflect"
	"strings"
	"testing"
)

func TestDiffDelivered(t *testing.T) {
	a, b := memFile("/etc/a", 0o644, "", []byte("a")), memFile("/etc/b", 0o644, "", []byte("b2"))
	c := memFile("/usr/local/bin/containerd", 0o755, "", []byte("new"))
	was := map[string]string{
		"/etc/a":                    a.SHA256, // unchanged
		"/etc/b":                    "0000",   // changed
		"/etc/gone":                 "1111",   // no longer delivered
		"/usr/local/bin/containerd": "2222",   // a changed program
	}
	changed, removed := diffDelivered(was, []*bootFile{a, b, c, memFile("/etc/new", 0o644, "", nil)})
	if want := []string{"/etc/b", "/etc/new", "/usr/local/bin/containerd"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed = %v, want %v", changed, want)
	}
	if want := []string{"/etc/gone"}; !reflect.DeepEqual(removed, want) {
		t.Errorf("removed = %v, want %v", removed, want)
	}
	if ch, rm := diffDelivered(map[string]string{"/etc/a": a.SHA256}, []*bootFile{a}); ch != nil || rm != nil {
		t.Errorf("an unchanged host: changed %v, removed %v", ch, rm)
	}
}

// A changed node program restarts its service; a plugin's file alone
// restarts none of them (the kubelet and the pool's units restart on every
// roll).
func TestRestarts(t *testing.T) {
	for _, tc := range []struct {
		changed []string
		want    []string
	}{
		{[]string{"/etc/fleet/greeting"}, nil},
		{[]string{"/usr/local/bin/containerd"}, []string{"containerd.service"}},
		{[]string{"/etc/containerd/certs.d/_default/hosts.toml"}, []string{"containerd.service"}},
		{[]string{"/usr/local/bin/kubeplug-registry", "/usr/local/bin/containerd-shim-runc-v2"}, []string{"containerd.service", "kubeplug-registry.service"}},
		{[]string{"/etc/containerdx"}, nil},
	} {
		if got := restarts(tc.changed); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("restarts(%v) = %v, want %v", tc.changed, got, tc.want)
		}
	}
}

func TestRestartRuncmd(t *testing.T) {
	got := restartRuncmd([][]string{
		{"systemctl", "daemon-reload"},
		{"systemctl", "enable", "--now", "fleet-marker.service"},
		{"systemctl", "enable", "--now", "kubeplug-boot.service", "kubeplug-after-deploy.path"},
	})
	want := [][]string{
		{"systemctl", "daemon-reload"},
		{"systemctl", "enable", "fleet-marker.service"},
		{"systemctl", "restart", "fleet-marker.service"},
		{"systemctl", "enable", "kubeplug-boot.service", "kubeplug-after-deploy.path"},
		{"systemctl", "restart", "kubeplug-boot.service"},
		{"systemctl", "start", "kubeplug-after-deploy.path"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restartRuncmd:\n got %v\nwant %v", got, want)
	}
}

func TestRemoveScript(t *testing.T) {
	s := removeScript([]string{"/etc/fleet/old", "/etc/systemd/system/old.service"})
	for _, want := range []string{"rm -f '/etc/fleet/old'", "systemctl disable --now 'old.service'", "rm -f '/etc/systemd/system/old.service'"} {
		if !strings.Contains(s, want) {
			t.Errorf("removeScript lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "disable --now 'old'") {
		t.Errorf("a file not a unit is disabled:\n%s", s)
	}
}

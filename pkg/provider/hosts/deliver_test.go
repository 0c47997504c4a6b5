package hosts

import (
	"strings"
	"testing"
)

func TestParseCloudConfig(t *testing.T) {
	s, err := parseCloudConfig("nodes/workers/cloud-init.yaml", []byte(`#cloud-config
write_files:
  - path: /etc/a
    permissions: "0600"
    owner: root:root
    content: hello
  - path: /etc/b
    permissions: "0755"
    encoding: b64
    content: AAEC
runcmd:
  - [systemctl, daemon-reload]
  - [systemctl, enable, --now, kubeplug-boot.service]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 2 || s.Files[0].Mode != 0o600 || string(s.Files[0].content) != "hello" || string(s.Files[1].content) != "\x00\x01\x02" || s.Files[1].Mode != 0o755 {
		t.Errorf("files = %+v %+v", s.Files[0], s.Files[1])
	}
	if len(s.Runcmd) != 2 || strings.Join(s.Runcmd[1], " ") != "systemctl enable --now kubeplug-boot.service" {
		t.Errorf("runcmd = %q", s.Runcmd)
	}
	for _, tc := range []struct{ in, want string }{
		{"write_files: []\n", "not a #cloud-config"},
		{"#cloud-config\npackages: [vim]\n", "key packages: the hosts provider applies only write_files and runcmd"},
		{"#cloud-config\nwrite_files:\n  - {path: /a, defer: true, content: x}\n", "write_files[0]: defer is not applied"},
		{"#cloud-config\nwrite_files:\n  - {path: a/b, content: x}\n", `path "a/b" is not a clean absolute path`},
		{"#cloud-config\nwrite_files:\n  - {path: /a, encoding: gzip, content: x}\n", `encoding "gzip"`},
		{"#cloud-config\nwrite_files:\n  - {path: /a, permissions: '0999', content: x}\n", `permissions "0999"`},
	} {
		if _, err := parseCloudConfig("f", []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}

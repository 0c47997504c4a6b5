package render

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// cloudConfig is the subset of cloud-init's #cloud-config that kubeplug writes. Field
// order is the output order.
type cloudConfig struct {
	WriteFiles []writeFile `yaml:"write_files"`
	Runcmd     []argv      `yaml:"runcmd"`
}

// argv is a command run without a shell, written on one line for the reviewer.
type argv []string

// MarshalYAML writes the argv in flow style.
func (a argv) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range a {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
	}
	return n, nil
}

type writeFile struct {
	Path        string `yaml:"path"`
	Permissions string `yaml:"permissions"`
	Owner       string `yaml:"owner,omitempty"`
	Encoding    string `yaml:"encoding,omitempty"`
	Content     string `yaml:"content"`
}

// cloudInit renders the machine as #cloud-config: every file, unit and drop-in through
// write_files, then runcmd reloads systemd, stops and masks the units plugins mask,
// enables and starts the plugins' units that ask for it, and last the agent's: kubeplug-boot.service (the hooks around the
// kubelet, see agentUnits) and the afterDeploy trigger. runcmd is a shell script
// that goes on after a failed line, so no line of it decides whether the kubelet
// starts: the boot does, and so machines booted with cloud-init and with Ignition
// run the same units.
func (r *renderer) cloudInit(m *machine) ([]byte, bool) {
	cc := cloudConfig{}
	add := func(f machineFile) {
		wf := writeFile{Path: f.path, Permissions: fmt.Sprintf("%04o", f.mode), Owner: f.owner, Content: f.content}
		if !utf8.ValidString(f.content) {
			wf.Encoding, wf.Content = "b64", base64.StdEncoding.EncodeToString([]byte(f.content))
		}
		cc.WriteFiles = append(cc.WriteFiles, wf)
	}
	files := append([]machineFile(nil), m.files...)
	var enable, mask, agent []string
	for _, au := range agentUnits() {
		if au.enable {
			agent = append(agent, au.name)
		}
	}
	for _, u := range m.units {
		if u.content != "" {
			files = append(files, machineFile{path: path.Join(unitDir, u.name), mode: 0o644, owner: "root:root", content: u.content})
		}
		for _, d := range u.dropIns {
			files = append(files, machineFile{path: path.Join(unitDir, u.name+".d", d.name), mode: 0o644, owner: "root:root", content: d.content})
		}
		if u.enable && !slices.Contains(agent, u.name) {
			enable = append(enable, u.name)
		}
		if u.mask {
			mask = append(mask, u.name)
		}
	}
	sortFiles(files)
	for _, f := range files {
		add(f)
	}
	cc.Runcmd = append(cc.Runcmd, argv{"systemctl", "daemon-reload"})
	if len(mask) > 0 {
		cc.Runcmd = append(cc.Runcmd, append(argv{"systemctl", "mask", "--now"}, mask...))
	}
	if len(enable) > 0 {
		cc.Runcmd = append(cc.Runcmd, append(argv{"systemctl", "enable", "--now"}, enable...))
	}
	cc.Runcmd = append(cc.Runcmd, append(argv{"systemctl", "enable", "--now"}, agent...))
	var b bytes.Buffer
	b.WriteString("#cloud-config\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(cc); err != nil {
		r.fatalf("", "nodes."+m.pool, "encoding cloud-init: %v", err)
		return nil, false
	}
	if err := enc.Close(); err != nil {
		r.fatalf("", "nodes."+m.pool, "encoding cloud-init: %v", err)
		return nil, false
	}
	return b.Bytes(), true
}

// ignition renders the machine as an Ignition v3.4.0 config: files in storage.files,
// units and drop-ins in systemd.units, the agent's among them (see agentUnits).
func (r *renderer) ignition(m *machine) ([]byte, bool) {
	var files []any
	for _, f := range m.files {
		e := map[string]any{
			"path":      f.path,
			"mode":      f.mode,
			"overwrite": true,
			"contents":  map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString([]byte(f.content))},
		}
		if user, group, _ := strings.Cut(f.owner, ":"); f.owner != "" {
			e["user"] = map[string]any{"name": user}
			if group != "" {
				e["group"] = map[string]any{"name": group}
			}
		}
		files = append(files, e)
	}
	var us []any
	for _, u := range m.units {
		e := map[string]any{"name": u.name}
		if u.content != "" {
			e["contents"] = u.content
		}
		if u.enable {
			e["enabled"] = true
		}
		if u.mask {
			e["mask"] = true
		}
		var ds []any
		for _, d := range u.dropIns {
			ds = append(ds, map[string]any{"name": d.name, "contents": d.content})
		}
		if len(ds) > 0 {
			e["dropins"] = ds
		}
		us = append(us, e)
	}
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage":  map[string]any{"files": files},
		"systemd":  map[string]any{"units": us},
	}
	b, err := marshalJSON(cfg)
	if err != nil {
		r.fatalf("", "nodes."+m.pool, "encoding ignition: %v", err)
		return nil, false
	}
	return b, true
}

func sortFiles(fs []machineFile) {
	slices.SortFunc(fs, func(a, b machineFile) int { return strings.Compare(a.path, b.path) })
}

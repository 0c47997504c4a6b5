package render

import (
	"context"
	"io/fs"
	"path"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// UnitDir is where machines get systemd unit files and their drop-in directories.
const UnitDir = unitDir

// Machine is the configuration of one pool's machines as values, for a provider
// that lays it down itself (the local provider writes it under a directory per
// node) instead of booting from cloud-init or Ignition. It is what those two
// formats are rendered from, so the three never disagree.
type Machine struct {
	Pool string
	Role string
	// Files sorted by path: the plugins' files, hook scripts, the hooks manifest
	// at HooksManifestPath, the kubelet's flags and, on the control plane, the
	// static Pods. Unit files are in Units.
	Files []MachineFile
	// Units sorted by name.
	Units []MachineUnit
}

// MachineFile is one file of a machine.
type MachineFile struct {
	// Path is absolute and clean, with forward slashes.
	Path    string
	Content []byte
	Mode    fs.FileMode
	// Owner is "user:group" or empty for root.
	Owner string
}

// MachineUnit is one systemd unit; Content is empty for a unit the machine
// already has and only gets drop-ins for.
type MachineUnit struct {
	Name    string
	Content string
	Enable  bool
	// Mask says the unit, one the machine's OS has, is stopped and masked.
	Mask    bool
	DropIns []MachineDropIn // sorted by name
}

// MachineDropIn is one drop-in file of a unit.
type MachineDropIn struct{ Name, Content string }

// UnitFiles returns the files the units are written as: UnitDir/<name> for a
// unit with content, UnitDir/<name>.d/<drop-in> for each drop-in, mode 0644.
func (m *Machine) UnitFiles() []MachineFile {
	var out []MachineFile
	for _, u := range m.Units {
		if u.Content != "" {
			out = append(out, MachineFile{Path: path.Join(unitDir, u.Name), Content: []byte(u.Content), Mode: 0o644, Owner: "root:root"})
		}
		for _, d := range u.DropIns {
			out = append(out, MachineFile{Path: path.Join(unitDir, u.Name+".d", d.Name), Content: []byte(d.Content), Mode: 0o644, Owner: "root:root"})
		}
	}
	return out
}

// Machines renders every pool's machine configuration, the control-plane pseudo
// pool included, by pool name. It checks the input as Files does and returns no
// machines when a diagnostic is fatal; the diagnostics are those Files reports
// for the control plane and the nodes.
func Machines(ctx context.Context, in Input) (map[string]*Machine, diag.List) {
	r := &renderer{in: in, out: map[string][]byte{}}
	if !r.check() {
		return nil, r.diags
	}
	// The control-plane machine carries the static Pods, rendered first.
	r.controlPlane(ctx)
	out := map[string]*Machine{}
	for _, name := range in.Model.PoolNames() {
		if err := ctx.Err(); err != nil {
			r.fatalf("", "", "render cancelled: %v", err)
			break
		}
		p := in.Model.Pools[name]
		m, ok := r.machine(p)
		if !ok {
			continue
		}
		out[name] = exportMachine(m, p.Role)
	}
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	return out, r.diags
}

func exportMachine(m *machine, role string) *Machine {
	e := &Machine{Pool: m.pool, Role: role}
	for _, f := range m.files {
		e.Files = append(e.Files, MachineFile{Path: f.path, Content: []byte(f.content), Mode: fs.FileMode(f.mode), Owner: f.owner}) //nolint:gosec // permission bits fit
	}
	for _, u := range m.units {
		mu := MachineUnit{Name: u.name, Content: u.content, Enable: u.enable, Mask: u.mask}
		for _, d := range u.dropIns {
			mu.DropIns = append(mu.DropIns, MachineDropIn{Name: d.name, Content: d.content})
		}
		e.Units = append(e.Units, mu)
	}
	return e
}

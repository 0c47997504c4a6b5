package k8sversions

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FlagComponents are the components whose flags the tables list, by binary name.
var FlagComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}

// pflagLine is a flag's first line in the help of a Kubernetes component
// (spf13/pflag): "  -v, --v Level   usage" or "      --name type   usage". pflag
// puts one space between the name and its type and at least two before the
// usage; a bool flag has no type.
var pflagLine = regexp.MustCompile(`^\s+(?:-[A-Za-z0-9], )?--([A-Za-z0-9][A-Za-z0-9._-]*)(?: (\S+))?(?:\s{2,}(.*))?$`)

// goflagLine is a flag's first line in the help of a program using Go's flag
// package (the local etcd): "  -name type", its usage on the next line.
var goflagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9._-]*)(?: (\S+))?$`)

// enumRE finds the enumerations the help writes in a usage: "Possible values:
// a, b", "Valid options are A or B", "Valid values are "a", "b" and "c"".
var enumRE = regexp.MustCompile(`(?:Possible values:|Valid options are|Valid values are|Supported options are|Acceptable options are)\s+([^.(]+)`)

// ParseHelp reads the flags of component from its --help output. complete is
// whether the help lists every flag the component accepts (false for a
// program whose help is Go's flag package: the local etcd, a subset of etcd's).
func ParseHelp(component, version, help string) FlagTable {
	t := FlagTable{Component: component, Version: version, Complete: true, Flags: map[string]Flag{}}
	sc := bufio.NewScanner(strings.NewReader(help))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	goflag := strings.HasPrefix(help, "Usage of ")
	t.Complete = !goflag
	var last string // a goflag flag whose usage is the next line
	for sc.Scan() {
		line := sc.Text()
		if goflag {
			if m := goflagLine.FindStringSubmatch(line); m != nil {
				last = m[1]
				t.Flags[m[1]] = flagOf(m[1], m[2], "")
				continue
			}
			if last != "" {
				t.Flags[last] = flagOf(last, t.Flags[last].Type, strings.TrimSpace(line))
				last = ""
			}
			continue
		}
		m := pflagLine.FindStringSubmatch(line)
		if m == nil || m[1] == "help" {
			continue
		}
		t.Flags[m[1]] = flagOf(m[1], m[2], m[3])
	}
	delete(t.Flags, "help")
	return t
}

// flagOf types a flag from its help: typ is the help's type name ("" for a
// bool), usage its first line.
func flagOf(name, typ, usage string) Flag {
	typ, _, _ = strings.Cut(typ, "[=") // "version[=true]": the value without the flag
	if typ == "" {
		typ = "bool"
	}
	f := Flag{Type: typ}
	switch {
	case typ == "string" && (strings.HasSuffix(name, "-url") || strings.HasSuffix(name, "-uri")):
		f.Type = FlagURL
	case (typ == "string" || typ == "strings") && (strings.HasSuffix(name, "-urls") || strings.Contains(usage, "(scheme://")):
		f.Type = FlagURLs
	}
	if typ == "string" || typ == "strings" {
		if m := enumRE.FindStringSubmatch(usage); m != nil {
			f.Enum = enumValues(m[1])
		}
	}
	return f
}

// enumValues splits "'a', 'b' and 'c'" or "A or B" into its values.
func enumValues(s string) []string {
	s = strings.NewReplacer(" and ", ",", " or ", ",").Replace(s)
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.Trim(strings.TrimSpace(v), `'"`+"`")
		if v == "" {
			continue
		}
		if strings.ContainsAny(v, " :") {
			return nil // prose, not a list of values
		}
		out = append(out, v)
	}
	if len(out) < 1 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// versionRE finds a component's version in its --version output:
// "Kubernetes v1.37.1", "etcd Version: 3.7.0".
var versionRE = regexp.MustCompile(`(?:Kubernetes v|etcd Version: )(\d+\.\d+\.\d+)`)

// ReadFlagTables runs every component of FlagComponents in binDir with --help
// and --version and returns their tables, under the Kubernetes version of
// kube-apiserver. A component missing from binDir is an error.
func ReadFlagTables(ctx context.Context, binDir string) (kubernetes string, tables []FlagTable, err error) {
	run := func(bin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, bin), args...)
		out, err := cmd.CombinedOutput()
		if err != nil && len(out) == 0 {
			return "", fmt.Errorf("running %s %s: %w", bin, strings.Join(args, " "), err)
		}
		// --help exits non-zero for Go's flag package (2): the output is the help.
		return string(out), nil
	}
	for _, c := range FlagComponents {
		v, err := run(c, "--version")
		if err != nil {
			return "", nil, err
		}
		m := versionRE.FindStringSubmatch(v)
		if m == nil {
			return "", nil, fmt.Errorf("%s --version: no version in %q", c, strings.TrimSpace(v))
		}
		help, err := run(c, "--help")
		if err != nil {
			return "", nil, err
		}
		if c == "kube-apiserver" {
			kubernetes = m[1]
		}
		tables = append(tables, ParseHelp(c, m[1], help))
	}
	return kubernetes, tables, nil
}

// Encode writes t as its checked-in file: one flag a line, sorted, so that a
// new Kubernetes version's diff is the flags that changed.
func (t FlagTable) Encode(kubernetes string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `go generate ./internal/k8sversions` from `%s --help` of Kubernetes %s. DO NOT EDIT.\n", t.Component, kubernetes)
	fmt.Fprintf(&b, "component: %s\nversion: %q\ncomplete: %t\nflags:\n", t.Component, t.Version, t.Complete)
	names := make([]string, 0, len(t.Flags))
	for n := range t.Flags {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f := t.Flags[n]
		fmt.Fprintf(&b, "  %s: {type: %s", n, strconv.Quote(f.Type))
		if len(f.Enum) > 0 {
			q := make([]string, len(f.Enum))
			for i, e := range f.Enum {
				q[i] = strconv.Quote(e)
			}
			fmt.Fprintf(&b, ", enum: [%s]", strings.Join(q, ", "))
		}
		b.WriteString("}\n")
	}
	return []byte(b.String())
}

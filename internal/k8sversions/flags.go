package k8sversions

//go:generate go run ./internal/genflags

import (
	"embed"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/suggest"
)

// FlagsDir is where the flag tables are, one directory per Kubernetes version
// holding one file per component (FlagComponents).
const FlagsDir = "internal/k8sversions/flags"

//go:embed flags
var flagFS embed.FS

// Types of flags beyond the help's own type names (bool, int32, duration, ip,
// string, strings, mapStringString, ...).
const (
	// FlagURL is a string flag named *-url or *-uri: one absolute URL.
	FlagURL = "url"
	// FlagURLs is a comma-separated list of absolute URLs: a flag named *-urls
	// or whose help asks for "(scheme://...)".
	FlagURLs = "urls"
)

// FlagTable is the flags one component of one Kubernetes version accepts, as
// its --help lists them (generated: go generate ./internal/k8sversions).
type FlagTable struct {
	Component string `json:"component"`
	// Version is the component's own version (etcd's is not Kubernetes').
	Version string `json:"version"`
	// Complete says the table lists every flag: an unknown flag is an error.
	// The local etcd's help lists the subset of etcd's flags it accepts, so an
	// unknown etcd flag is only a warning.
	Complete bool            `json:"complete"`
	Flags    map[string]Flag `json:"flags"`
}

// Flag is one flag's type and, where the help lists them, its values.
type Flag struct {
	Type string   `json:"type"`
	Enum []string `json:"enum,omitempty"`
}

// flagTables are the embedded tables by Kubernetes version and component.
var flagTables = sync.OnceValues(func() (map[string]map[string]FlagTable, error) {
	out := map[string]map[string]FlagTable{}
	err := fs.WalkDir(flagFS, "flags", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" {
			return err
		}
		b, err := flagFS.ReadFile(p)
		if err != nil {
			return err
		}
		var t FlagTable
		if err := yaml.UnmarshalStrict(b, &t); err != nil {
			return fmt.Errorf("internal/k8sversions/%s: %w", p, err)
		}
		v := path.Base(path.Dir(p))
		if out[v] == nil {
			out[v] = map[string]FlagTable{}
		}
		out[v][t.Component] = t
		return nil
	})
	return out, err
})

// FlagTables returns the flag tables of Kubernetes version (like "1.37.1" or
// "v1.37.2") by component: those of the version itself, else of the latest
// patch release of its minor version the tables have; nil when they have none.
func FlagTables(version string) map[string]FlagTable {
	all, err := flagTables()
	if err != nil {
		panic(err) // a defect of the embedded tables, caught by the package's tests
	}
	want, err := semver.NewVersion(strings.TrimPrefix(version, "v"))
	if err != nil {
		return nil
	}
	if t, ok := all[want.String()]; ok {
		return t
	}
	var best *semver.Version
	for v := range all {
		sv, err := semver.NewVersion(v)
		if err == nil && sv.Major() == want.Major() && sv.Minor() == want.Minor() && (best == nil || sv.GreaterThan(best)) {
			best = sv
		}
	}
	if best == nil {
		return nil
	}
	return all[best.String()]
}

// CheckFlag says what is wrong with --name=value of component in Kubernetes
// version: "" when nothing is (or when the tables do not know the version or
// the component); fatal when the component would refuse it, else a warning.
func CheckFlag(version, component, name, value string) (msg string, fatal bool) {
	t, ok := FlagTables(version)[component]
	if !ok {
		return "", false
	}
	f, ok := t.Flags[name]
	if !ok {
		msg := fmt.Sprintf("%s %s has no flag --%s", component, t.Version, name)
		known := make([]string, 0, len(t.Flags))
		for n := range t.Flags {
			known = append(known, n)
		}
		msg += suggest.Hint(suggest.Closest(name, known))
		if !t.Complete {
			return msg + " (the flags of its local build; the table lists only those)", false
		}
		return msg, true
	}
	if err := f.check(value); err != "" {
		return fmt.Sprintf("%s %s: --%s=%s: %s", component, t.Version, name, value, err), true
	}
	return "", false
}

// check says what is wrong with value for f, "" when nothing is. Types the
// tables do not check (string, maps, ...) take any value; an empty value is
// a string flag's empty string, nothing else's.
//
// Branches: one case per type of flag value the tables know (bool, int, duration,
// URL, enumeration, ...), each with its own message.
func (f Flag) check(value string) string {
	var err error
	switch {
	case f.Type == "bool":
		_, err = strconv.ParseBool(value)
		if err != nil {
			return "expected a bool (true or false)"
		}
	case strings.HasPrefix(f.Type, "int") && !strings.HasSuffix(f.Type, "Slice"):
		bits := 64
		if n, e := strconv.Atoi(strings.TrimPrefix(f.Type, "int")); e == nil {
			bits = n
		}
		if _, err = strconv.ParseInt(value, 0, bits); err != nil {
			return "expected an integer (" + f.Type + ")"
		}
	case strings.HasPrefix(f.Type, "uint") && !strings.HasSuffix(f.Type, "Slice"):
		if _, err = strconv.ParseUint(value, 0, 64); err != nil {
			return "expected a non-negative integer"
		}
	case strings.HasPrefix(f.Type, "float"):
		if _, err = strconv.ParseFloat(value, 64); err != nil {
			return "expected a number"
		}
	case f.Type == "duration":
		if _, err = time.ParseDuration(value); err != nil {
			return "expected a duration like 30s or 5m"
		}
	case f.Type == "ip":
		if value != "" && net.ParseIP(value) == nil {
			return "expected an IP address"
		}
	case f.Type == FlagURL:
		if value != "" && !absURL(value) {
			return "expected an absolute URL like https://host/path"
		}
	case f.Type == FlagURLs:
		for _, u := range strings.Split(value, ",") {
			if value != "" && !absURL(u) {
				return fmt.Sprintf("expected comma-separated absolute URLs like http://host:port, found %q", u)
			}
		}
	}
	if len(f.Enum) > 0 && value != "" {
		vals := []string{value}
		if f.Type == "strings" {
			vals = strings.Split(value, ",")
		}
		for _, v := range vals {
			if !slices.Contains(f.Enum, v) {
				return fmt.Sprintf("expected one of %s", strings.Join(f.Enum, ", "))
			}
		}
	}
	return ""
}

// absURL says whether s is an absolute URL with a host.
func absURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != "" && !strings.ContainsAny(s, " \t")
}

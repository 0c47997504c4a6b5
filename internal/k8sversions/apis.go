package k8sversions

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

//go:embed apis.yaml
var apisYAML []byte

// APIsFile is where the table of deprecated and removed APIs comes from.
const APIsFile = "internal/k8sversions/apis.yaml"

// API is one API version of a built-in kind that Kubernetes deprecated or
// stopped serving.
type API struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Deprecated and Removed are minor versions like "1.25": from Deprecated
	// the API is deprecated, from Removed it is not served. Removed is empty
	// for an API still served.
	Deprecated string `json:"deprecated"`
	Removed    string `json:"removed,omitempty"`
	// Replacement is what to write instead.
	Replacement string `json:"replacement"`
}

// APIStatus says whether a Kubernetes version serves an API.
type APIStatus int

// Statuses of an API in a Kubernetes version.
const (
	// Served is every API the table does not name, and those it names for
	// later versions.
	Served APIStatus = iota
	// Deprecated is served, with a warning from the API server.
	Deprecated
	// Removed is not served: an object of it cannot be applied.
	Removed
)

var apis = sync.OnceValues(func() (map[string]API, error) {
	var t struct {
		APIs []API `json:"apis"`
	}
	if err := yaml.UnmarshalStrict(apisYAML, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", APIsFile, err)
	}
	out := map[string]API{}
	for _, a := range t.APIs {
		for _, v := range []string{a.Deprecated, a.Removed} {
			if _, _, ok := minorOf(v); v != "" && !ok {
				return nil, fmt.Errorf("%s: %s %s: expected a minor version like 1.25, found %q", APIsFile, a.APIVersion, a.Kind, v)
			}
		}
		if a.APIVersion == "" || a.Kind == "" || a.Deprecated == "" || a.Replacement == "" {
			return nil, fmt.Errorf("%s: %s %s: apiVersion, kind, deprecated and replacement are required", APIsFile, a.APIVersion, a.Kind)
		}
		key := a.APIVersion + " " + a.Kind
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s: %s is listed twice", APIsFile, key)
		}
		out[key] = a
	}
	return out, nil
})

// APIs returns the table of deprecated and removed APIs. An error is a defect
// of the embedded table, caught by the package's tests.
func APIs() (map[string]API, error) { return apis() }

// ServedAPI says whether Kubernetes version (like "1.37.1" or "v1.37") serves
// kind at apiVersion, and the table's entry when it names the API. A version
// that is not one leaves every API Served.
func ServedAPI(version, apiVersion, kind string) (API, APIStatus) {
	t, err := apis()
	if err != nil {
		panic(err)
	}
	a, ok := t[apiVersion+" "+kind]
	if !ok {
		return API{}, Served
	}
	major, minor, ok := minorOf(strings.TrimPrefix(version, "v"))
	if !ok {
		return a, Served
	}
	at := func(v string) bool {
		vm, vn, ok := minorOf(v)
		return ok && (major > vm || major == vm && minor >= vn)
	}
	switch {
	case a.Removed != "" && at(a.Removed):
		return a, Removed
	case at(a.Deprecated):
		return a, Deprecated
	}
	return a, Served
}

// minorOf reads the major and minor numbers of "1.25" or "1.25.3".
func minorOf(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// Message says what is wrong with an object of a in Kubernetes version, in
// status, to follow "<the object> is": "not served by Kubernetes 1.37.1
// (removed in 1.25): use policy/v1".
func (a API) Message(version string, status APIStatus) string {
	v := strings.TrimPrefix(version, "v")
	if status == Removed {
		return fmt.Sprintf("not served by Kubernetes %s (removed in %s): use %s", v, a.Removed, a.Replacement)
	}
	msg := "deprecated since Kubernetes " + a.Deprecated
	if a.Removed != "" {
		msg += " and not served from " + a.Removed
	}
	return msg + ": use " + a.Replacement
}

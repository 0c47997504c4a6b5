// Command kubeplug-localcluster is a multicall binary holding a whole Kubernetes
// cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
// kwok (simulated kubelets), and kubelet and kube-proxy for real nodes.
//
// One binary instead of six means one link step and one copy of the shared
// Kubernetes libraries, which is most of the build time. The component to run is
// chosen by the base name of argv[0] (so symlinks named after the components work,
// and the output directory can serve as controller-runtime envtest assets), or,
// failing that, by the first argument:
//
//	kubeplug-localcluster kube-apiserver --etcd-servers=...
//	ln -s kubeplug-localcluster kubectl && ./kubectl get nodes
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// component runs one program with its arguments (without the program name) and
// returns the process exit status.
type component func(args []string) int

// components maps the names under which the binary can be invoked to the programs.
var components = map[string]component{
	"etcd":                    runEtcd,
	"kube-apiserver":          runAPIServer,
	"kube-controller-manager": runControllerManager,
	"kube-scheduler":          runScheduler,
	"kubectl":                 runKubectl,
	"kubelet":                 runKubelet,
	"kube-proxy":              runProxy,
	"kwok":                    runKwok,
}

func main() {
	name, args, ok := dispatch(os.Args)
	if !ok {
		usage()
		os.Exit(2)
	}
	// Several components (kubectl plugin handling, kwok's config flags) read
	// os.Args directly; make it look as if the component had been exec'd by name.
	os.Args = append([]string{name}, args...)
	os.Exit(components[name](args))
}

// dispatch picks the component from argv[0]'s base name, or else from the first
// argument.
func dispatch(argv []string) (name string, args []string, ok bool) {
	if len(argv) == 0 {
		return "", nil, false
	}
	base := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if _, found := components[base]; found {
		return base, argv[1:], true
	}
	if len(argv) > 1 {
		if _, found := components[argv[1]]; found {
			return argv[1], argv[2:], true
		}
	}
	return "", nil, false
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: %s COMPONENT [flags]\n   or: invoke through a symlink named after the component\ncomponents: %s\n",
		filepath.Base(os.Args[0]), strings.Join(names, ", "))
}

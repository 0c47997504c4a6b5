package nodeimage

// BuiltinImage is an image the built-in plugins run, built ko-style from a Go
// module by `make images` and pushed into every cluster's registry under the
// upstream name the plugin's manifests use, so those manifests run unchanged.
type BuiltinImage struct {
	// Binary is the program's file name in the images directory; it becomes
	// the image's only layer and its entrypoint /<Binary>.
	Binary string
	// Image is the upstream reference the plugins name.
	Image string
	// OnDemand images are built by their own make target, not `make images`;
	// missing, they are not mentioned.
	OnDemand bool
}

// BuiltinImages are the images `make images` builds. Their tags follow the Go
// module versions pinned in ./images/*/go.mod and ./localcluster/go.mod (a test
// keeps the two in step).
var BuiltinImages = []BuiltinImage{
	{Binary: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.15.0"},
	{Binary: "metrics-server", Image: "registry.k8s.io/metrics-server/metrics-server:v0.8.0"},
	{Binary: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
	// kubeplug itself, for the built-in kubeplug-controller plugin: built only by
	// `make controller-image`, so usually skipped.
	{Binary: "kubeplug", Image: "ghcr.io/kubeplug/kubeplug:latest", OnDemand: true},
}

# kubeplug — build, lint, test.
#
# `make test` is the one command CI runs (.ci/run) and the README's test command.
# It installs its own tools from the Go module proxy into ./bin/tools and builds the
# local control plane (./localcluster, a separate Go module) when it is missing.

SHELL := /usr/bin/env bash
GO ?= go
ROOT := $(abspath .)
TOOLS := $(ROOT)/bin/tools
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
KUBEPLUG := $(ROOT)/bin/kubeplug

.PHONY: all build test unit lint tools up down quickstart fuzz bench clean

all: build

# Linked statically (no cgo). A release build: no symbol table or DWARF (-s -w)
# and no local paths (-trimpath), which keeps the CLI's binary about a third
# smaller (issue 42); `go build ./cmd/kubeplug` still gives a debuggable one.
# The controller's image has its own binary (controller-image). The version is
# stamped (git describe), which also lets `kubeplug version` answer before the
# heavy packages initialise (cmd/kubeplug/internal/leanstart).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_FLAGS := -trimpath -ldflags='-s -w -X github.com/kubeplug/kubeplug/internal/buildversion.Version=$(VERSION)'
build:
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(KUBEPLUG) ./cmd/kubeplug

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS)/golangci-lint $(GOLANGCI_LINT)

tools: $(GOLANGCI_LINT)

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

unit: localcluster localcluster-1.36 localnode images controller-image node-deps validators browser node-exporter moto machine-image fuzz
	$(GO) test -timeout 45m ./...

# Every parser of user input, fuzzed for a few seconds from its seed corpus (the
# repository's examples plus test/harness/fuzzseed's hostile classes): enough to
# catch a regression on the known edges while keeping CI time small.
FUZZTIME ?= 3s
FUZZ_TARGETS := ./internal/yamldoc:FuzzParse ./pkg/config:FuzzParseCluster \
	./pkg/plugin:FuzzDecodeManifest ./pkg/archive:FuzzExtract \
	./pkg/config:FuzzValuesFile ./pkg/hookspec:FuzzParseManifest \
	./pkg/expansion:FuzzDecode ./pkg/expansion:FuzzOpenArchive \
	./pkg/lock:FuzzRead ./pkg/source:FuzzDecodeIndex ./pkg/oci:FuzzRegistryResponses
# On a loaded machine Go's fuzz coordinator sometimes gives up on a worker at
# the end of -fuzztime ("context deadline exceeded", no failing input written):
# such a run is tried once more. A real finding writes testdata/fuzz/ and fails.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  log=$$(mktemp); \
	  if ! $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" >"$$log" 2>&1; then \
	    cat "$$log"; \
	    if grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
	      echo "fuzz $$t: the coordinator timed out (no failing input); once more"; \
	      $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || { rm -f "$$log"; exit 1; }; \
	    else rm -f "$$log"; exit 1; fi; \
	  else cat "$$log"; fi; \
	  rm -f "$$log"; \
	done

# The hosts provider's e2e tests boot machines too, so they run after `unit`
# rather than beside its realnode package: two packages booting machines at
# once on two cores is what made them fail in the past (docs/hosts.md).
test: lint unit test-hosts

# The HA upgrade and fault tests (test/e2e/realnode TestHAUpgrade, TestHAFaults):
# five or six machines each, 6-20 minutes on two cores; not part of `make test`,
# whose CI runs every other package beside them (both passed on main alone:
# docs/ha.md).
# The hosts provider's e2e tests (test/e2e/hosts TestCluster, TestAirGap,
# TestManagedCluster with its 1.36 → 1.37 upgrade): part of `make test`, after
# `unit`; also on their own here.
.PHONY: test-hosts
test-hosts: localcluster localcluster-1.36 localnode images node-deps machine-image
	KUBEPLUG_E2E_HOSTS=1 $(GO) test -timeout 45m ./test/e2e/hosts -v

.PHONY: test-ha
test-ha: localcluster localcluster-1.36 localnode node-deps machine-image
	KUBEPLUG_E2E_HA=1 $(GO) test -timeout 60m ./test/e2e/realnode -run 'TestHAUpgrade|TestHAFaults' -v

# The README's main-job command: the quickstart as a local cluster — the control
# plane with the plugins' flags, simulated nodes that ran the plugins' hooks, every
# plugin deployed and validated. `make down` stops it.
# The Kubernetes binaries come from the release locations (or $KUBEPLUG_K8S_MIRROR)
# into the binary cache when they can, verified by their published digests; else
# (offline) they are built from Go modules (make localcluster). docs/versions.md.
#
# What the quickstart needs is built side by side (make -j$(UP_JOBS), up-deps):
# kubeplug, the real node's programs, each of the three images and the
# Kubernetes binaries' download are independent Go builds of separate modules,
# so on a fresh machine one's module downloads and single-threaded link overlap
# the others' compiles (issue 42: `make up` on a fresh machine under 12 min).
# Nothing else (the machine image, the 1.36 control plane, the test tools) is
# built before `up`; `make test` builds those.
QUICKSTART_K8S := $(shell sed -n 's|^[[:space:]]*kubernetesVersion:[[:space:]]*\([0-9.]*\).*|\1|p' examples/quickstart/cluster.yaml)
UP_JOBS ?= 4
up:
	@$(MAKE) --no-print-directory -j$(UP_JOBS) up-deps
	$(KUBEPLUG) up -f examples/quickstart/cluster.yaml

.PHONY: up-deps k8s-binaries
up-deps: build localnode images node-deps k8s-binaries

# The quickstart's Kubernetes binaries: those of $KUBEPLUG_LOCALCLUSTER_BIN when
# they are the quickstart's version (kubeplug up then uses them), else the release's in the binary cache,
# else the local control plane built from Go modules.
k8s-binaries:
	@if [ -n "$$KUBEPLUG_LOCALCLUSTER_BIN" ] && "$$KUBEPLUG_LOCALCLUSTER_BIN/kube-apiserver" --version 2>/dev/null | grep -qx 'Kubernetes v$(QUICKSTART_K8S)'; then \
	  echo "make up: Kubernetes binaries from KUBEPLUG_LOCALCLUSTER_BIN=$$KUBEPLUG_LOCALCLUSTER_BIN"; \
	else $(GO) run ./cmd/kubeplug-k8s-fetch $(QUICKSTART_K8S) || { echo "make up: building Kubernetes $(QUICKSTART_K8S) from Go modules instead"; $(MAKE) localcluster; }; fi

down: build
	$(KUBEPLUG) down -f examples/quickstart/cluster.yaml

# Validate, plan and render the quickstart into out/quickstart, without a cluster.
quickstart: build
	$(KUBEPLUG) config validate -f examples/quickstart/cluster.yaml
	$(KUBEPLUG) plan -f examples/quickstart/cluster.yaml
	$(KUBEPLUG) render -f examples/quickstart/cluster.yaml --output-dir out/quickstart

# Benchmarks against the DESIGN.md targets; figures go into the issue notes. The
# apply benchmark compares kubeplug with kubectl (from the local control plane build)
# and helm (built here from its Go module) side by side on the local control plane.
HELM := $(TOOLS)/helm
$(HELM): tools/helm/go.mod
	@mkdir -p $(TOOLS)
	cd tools/helm && $(GO) build -o $@ helm.sh/helm/v4/cmd/helm

# Each [perf] benchmark also appends its targets' rows to $(BENCH_SUMMARY)
# (test/bench/summary_test.go); the last step prints them as one table, every
# target beside its anchor. `make up` on a fresh machine is measured only with
# KUBEPLUG_BENCH_COLD=1 (a quarter of an hour or more, ~10 GB): else its row says
# it was not measured.
BENCH_SUMMARY := $(ROOT)/_output/bench/summary.md
bench: localcluster localnode images node-deps $(HELM)
	@mkdir -p $(dir $(BENCH_SUMMARY)) && : > $(BENCH_SUMMARY)
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/resolve ./pkg/action
	KUBEPLUG_BENCH_SUMMARY=$(BENCH_SUMMARY) KUBEPLUG_HELM=$(HELM) $(GO) test -run '^$$' -bench BenchmarkApplySizes -benchtime 3x -timeout 60m -v ./test/bench
	$(GO) test -run '^$$' -bench BenchmarkNoopApply1000 -benchtime 10x -timeout 30m ./test/bench
	KUBEPLUG_BENCH_SUMMARY=$(BENCH_SUMMARY) $(GO) test -run '^$$' -bench 'BenchmarkUp$$' -benchtime 3x -timeout 30m -v ./test/bench
	KUBEPLUG_BENCH_SUMMARY=$(BENCH_SUMMARY) $(GO) test -run '^$$' -bench BenchmarkUpRealNode -benchtime 3x -timeout 30m -v ./test/bench
	KUBEPLUG_BENCH_SUMMARY=$(BENCH_SUMMARY) $(GO) test -run '^$$' -bench BenchmarkStart -benchtime 20x -timeout 15m -v ./test/bench
	$(GO) test -run '^$$' -bench BenchmarkExpansion -benchtime 1x -timeout 30m ./test/bench
	KUBEPLUG_BENCH_SUMMARY=$(BENCH_SUMMARY) $(GO) test -run '^$$' -bench BenchmarkMakeUpCold -benchtime 1x -timeout 90m -v ./test/bench
	@printf '\n[perf] targets, each beside its anchor (issue 42; medians of each benchmark above):\n\n'
	@echo '| target | kubeplug | anchor | ratio | met | CPU s: kubeplug, the cluster'"'"'s processes (anchor'"'"'s) |'
	@echo '|---|---|---|---|---|---|'
	@cat $(BENCH_SUMMARY)

# The local control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl and kwok built from the ./localcluster module as one
# multicall binary plus symlinks named after the components, so the directory also
# serves as controller-runtime envtest assets (KUBEBUILDER_ASSETS). Tests find it
# here or through $KUBEPLUG_LOCALCLUSTER_BIN. A real file target: it rebuilds only
# when the module's sources change, and then mostly from the Go build cache.
LOCALCLUSTER_BIN := $(ROOT)/_output/localcluster/bin
LOCALCLUSTER := $(LOCALCLUSTER_BIN)/kubeplug-localcluster
LOCALCLUSTER_COMPONENTS := etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kubelet kube-proxy
LOCALCLUSTER_SRCS := $(shell find localcluster -type f \( -name '*.go' -o -name go.mod -o -name go.sum \))
# Release builds of Kubernetes stamp their version at link time; without it the
# API server would report v0.0.0-master. Taken from localcluster/go.mod.
LOCALCLUSTER_KUBE_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[0-9.]*\).*|\1|p' localcluster/go.mod)
LOCALCLUSTER_KUBE_VERSION_PARTS := $(subst ., ,$(patsubst v%,%,$(LOCALCLUSTER_KUBE_VERSION)))
LOCALCLUSTER_LDFLAGS := -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(LOCALCLUSTER_KUBE_VERSION) \
	-X $(pkg).gitMajor=$(word 1,$(LOCALCLUSTER_KUBE_VERSION_PARTS)) \
	-X $(pkg).gitMinor=$(word 2,$(LOCALCLUSTER_KUBE_VERSION_PARTS)) \
	-X $(pkg).gitTreeState=clean)

.PHONY: localcluster
localcluster: $(LOCALCLUSTER)

$(LOCALCLUSTER): $(LOCALCLUSTER_SRCS)
	@mkdir -p $(LOCALCLUSTER_BIN)
	cd localcluster && $(GO) build -ldflags='$(LOCALCLUSTER_LDFLAGS)' -o $@.tmp .
	mv -f $@.tmp $@
	for c in $(LOCALCLUSTER_COMPONENTS); do ln -sfn kubeplug-localcluster $(LOCALCLUSTER_BIN)/$$c; done

# The previous minor, 1.36.3 (internal/k8sversions/versions.yaml), built from the
# same sources against localcluster/go.1.36.mod (go build -modfile): what a cluster
# file naming 1.36.3 runs offline. With the Go build cache warm from the 1.37.1
# build it costs about 7 minutes cold on 2 cores (docs/versions.md).
LOCALCLUSTER_136_BIN := $(ROOT)/_output/localcluster-1.36/bin
LOCALCLUSTER_136 := $(LOCALCLUSTER_136_BIN)/kubeplug-localcluster
LOCALCLUSTER_136_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[0-9.]*\).*|\1|p' localcluster/go.1.36.mod)
LOCALCLUSTER_136_LDFLAGS := -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(LOCALCLUSTER_136_VERSION) \
	-X $(pkg).gitMajor=1 -X $(pkg).gitMinor=36 -X $(pkg).gitTreeState=clean)

.PHONY: localcluster-1.36
localcluster-1.36: $(LOCALCLUSTER_136)

$(LOCALCLUSTER_136): $(filter %.go,$(LOCALCLUSTER_SRCS)) localcluster/go.1.36.mod localcluster/go.1.36.sum
	@mkdir -p $(LOCALCLUSTER_136_BIN)
	cd localcluster && $(GO) build -modfile=go.1.36.mod -ldflags='$(LOCALCLUSTER_136_LDFLAGS)' -o $@.tmp .
	mv -f $@.tmp $@
	for c in $(LOCALCLUSTER_COMPONENTS); do ln -sfn kubeplug-localcluster $(LOCALCLUSTER_136_BIN)/$$c; done

# The real nodes' programs (spec.provider.local.realPools): containerd and its runc
# shim built from their Go module, pinned in ./localnode (a separate module, like
# ./localcluster), plus the sandbox ("pause") program and kubeplug-registry, the
# cluster's OCI registry (go-containerregistry). kubelet and kube-proxy are in the
# localcluster binary. Tests and the local provider find them here or through
# $KUBEPLUG_LOCALNODE_BIN.
LOCALNODE_BIN := $(ROOT)/_output/localnode/bin
LOCALNODE := $(LOCALNODE_BIN)/.built
LOCALNODE_SRCS := $(shell find localnode -type f \( -name '*.go' -o -name go.mod -o -name go.sum \))
.PHONY: localnode
localnode: $(LOCALNODE)

$(LOCALNODE): $(LOCALNODE_SRCS)
	@mkdir -p $(LOCALNODE_BIN)
	cd localnode && CGO_ENABLED=0 $(GO) build -tags 'no_btrfs no_devmapper no_zfs' -ldflags='-s -w' -o $(LOCALNODE_BIN)/ \
	  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	  ./cmd/pause ./cmd/kubeplug-registry
	touch $@

# The machine image that the local provider's machines boot
# (spec.provider.local.machines): a Debian base layer from debootstrap and a
# layer of the project's binaries and unit files, each kept under its content
# digest in _output/machine and rebuilt only when an input changes
# (images/machine/build.sh). Needs root (debootstrap); debootstrap itself comes
# from Debian when missing.
MACHINE_IMAGE := $(ROOT)/_output/machine
.PHONY: machine-image
machine-image: build localcluster localnode
	@command -v debootstrap >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends debootstrap || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends debootstrap; }; }
	bash images/machine/build.sh $(MACHINE_IMAGE) $(KUBEPLUG) $(LOCALCLUSTER_BIN) $(LOCALNODE_BIN)

# A local OCI registry for plugins (plugin push, sign --push, oci:// catalogs):
# kubeplug-registry, the real nodes' registry (./localnode), serving the
# distribution API on REGISTRY_ADDR with blobs and manifests kept in
# REGISTRY_DIR across restarts. Runs in the foreground until Ctrl-C; kubeplug
# speaks plain HTTP to a loopback registry without --plain-http.
REGISTRY_ADDR ?= 127.0.0.1:5000
REGISTRY_DIR ?= $(ROOT)/_output/registry
.PHONY: registry
registry:
	@mkdir -p $(LOCALNODE_BIN)
	cd localnode && CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $(LOCALNODE_BIN)/ ./cmd/kubeplug-registry
	$(LOCALNODE_BIN)/kubeplug-registry --listen $(REGISTRY_ADDR) --dir $(REGISTRY_DIR)

# The built-in plugins' images, built from their Go modules (no Dockerfile, no
# daemon): CoreDNS and metrics-server each from a module of its own under ./images
# (their Kubernetes libraries differ from each other's), agnhost (the quickstart's
# workload) from k8s.io/kubernetes in ./localcluster. `up` makes each an image of
# one layer and pushes it into a cluster with real nodes under the upstream name
# the plugins use (pkg/provider/nodeimage.BuiltinImages).
# Each image's program is a target of its own, so that `make -j` builds the three
# side by side.
IMAGES_BIN := $(ROOT)/_output/images/bin
IMAGES := $(IMAGES_BIN)/.built
.PHONY: images
images: $(IMAGES)

$(IMAGES): $(IMAGES_BIN)/coredns $(IMAGES_BIN)/metrics-server $(IMAGES_BIN)/agnhost
	touch $@

$(IMAGES_BIN)/coredns: images/coredns/go.mod images/coredns/go.sum
	@mkdir -p $(IMAGES_BIN)
	cd images/coredns && CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $@.tmp github.com/coredns/coredns
	mv -f $@.tmp $@

$(IMAGES_BIN)/metrics-server: images/metrics-server/go.mod images/metrics-server/go.sum
	@mkdir -p $(IMAGES_BIN)
	cd images/metrics-server && CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $@.tmp sigs.k8s.io/metrics-server/cmd/metrics-server
	mv -f $@.tmp $@

$(IMAGES_BIN)/agnhost: localcluster/go.mod localcluster/go.sum
	@mkdir -p $(IMAGES_BIN)
	cd localcluster && CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $@.tmp k8s.io/kubernetes/test/images/agnhost
	mv -f $@.tmp $@

# kubeplug's own image, which the built-in kubeplug-controller plugin runs: the
# controller's binary (cmd/kubeplug-controller: kubeplug with only its controller
# and version verbs; of the providers only hosts, for ManagedCluster), static, put into _output/images/bin as
# `kubeplug` like the images above, so that `up` pushes it (as
# ghcr.io/kubeplug/kubeplug:latest) into a local cluster's registry. Not part of
# `images` (only a cluster that enables the controller plugin needs it), but of
# `unit`: TestRealNode has up push it.
.PHONY: controller-image
controller-image:
	@mkdir -p $(IMAGES_BIN)
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(IMAGES_BIN)/kubeplug ./cmd/kubeplug-controller

# What a real node needs from Debian: runc (the OCI runtime), the CNI plugins
# (bridge, host-local, portmap, loopback in /usr/lib/cni), iptables and conntrack
# for kube-proxy. Installed only when one is missing.
NODE_PKGS := runc containernetworking-plugins iptables conntrack
.PHONY: node-deps
node-deps:
	@command -v runc >/dev/null && [ -x /usr/lib/cni/bridge ] && command -v iptables >/dev/null && command -v conntrack >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends $(NODE_PKGS) || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $(NODE_PKGS); }; }
	@# Every machine's systemd and containerd hold inotify instances; the kernel's
	@# default of 128 per user runs out with a few machines booted at once (containerd
	@# then starts without its CRI plugin). Raised as kind's docs advise, never lowered.
	@[ "$$(sysctl -n fs.inotify.max_user_instances)" -ge 512 ] || \
	  $$([ "$$(id -u)" = 0 ] || echo sudo) sysctl -q -w fs.inotify.max_user_instances=512

# The validators the render tests run on rendered node files, from Debian. Installed
# only when one is missing; `apt-get update` only when the install fails without it.
VALIDATOR_PKGS := cloud-init ignition systemd
.PHONY: validators
validators:
	@command -v cloud-init >/dev/null && command -v ignition-validate >/dev/null && command -v systemd-analyze >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends $(VALIDATOR_PKGS) || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $(VALIDATOR_PKGS); }; }

# Headless Chromium for the dashboard's browser tests (test/e2e/dashboard, driven
# by chromedp), from Debian. Installed only when missing; under CI a missing
# browser fails those tests rather than skipping them.
BROWSER_PKGS := chromium
.PHONY: browser
browser:
	@command -v chromium >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends $(BROWSER_PKGS) || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $(BROWSER_PKGS); }; }

# htmx and its server-sent-events extension, vendored from npm into the
# dashboard's embedded static files (committed: the build needs no network).
# `make vendor-htmx` fetches the pinned versions again and replaces them.
HTMX_VERSION := 2.0.11
HTMX_SSE_VERSION := 2.2.4
.PHONY: vendor-htmx
vendor-htmx:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd "$$tmp" && \
	  npm pack --silent htmx.org@$(HTMX_VERSION) htmx-ext-sse@$(HTMX_SSE_VERSION) >/dev/null && \
	  tar xzf htmx.org-$(HTMX_VERSION).tgz package/dist/htmx.min.js && cp package/dist/htmx.min.js $(ROOT)/pkg/dashboard/static/htmx.min.js && \
	  tar xzf htmx-ext-sse-$(HTMX_SSE_VERSION).tgz package/dist/sse.min.js && cp package/dist/sse.min.js $(ROOT)/pkg/dashboard/static/htmx-ext-sse.min.js

# node_exporter for the node-monitoring plugin on simulated nodes (examples/baseline
# sets the plugin's `source` to it through NODE_EXPORTER_SOURCE): built from its Go
# module, pinned in tools/node-exporter (a separate module, so its dependencies stay
# out of kubeplug's go.mod), and stamped like a release build so `node_exporter
# --version` reports the version the plugin's install hook expects. Nothing
# prebuilt is downloaded. A file target, built only when missing.
NODE_EXPORTER := $(ROOT)/_output/tools/node_exporter
NODE_EXPORTER_VERSION := $(shell sed -n 's|^[[:space:]]*github.com/prometheus/node_exporter v\([0-9.]*\).*|\1|p' tools/node-exporter/go.mod)
NODE_EXPORTER_LDFLAGS := -s -w \
	-X github.com/prometheus/common/version.Version=$(NODE_EXPORTER_VERSION) \
	-X github.com/prometheus/common/version.Revision=v$(NODE_EXPORTER_VERSION) \
	-X github.com/prometheus/common/version.Branch=HEAD \
	-X github.com/prometheus/common/version.BuildUser=kubeplug-make
.PHONY: node-exporter
node-exporter: $(NODE_EXPORTER)

$(NODE_EXPORTER): tools/node-exporter/go.mod
	@mkdir -p $(dir $@)
	cd tools/node-exporter && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='$(NODE_EXPORTER_LDFLAGS)' -o $@.tmp github.com/prometheus/node_exporter
	mv -f $@.tmp $@

# The AWS emulator the aws provider's tests run on loopback (test/harness/testaws):
# moto's server mode from PyPI with every package pinned by
# tools/moto/requirements.txt, in a virtualenv of its own. python3 and its venv
# module come from Debian when missing. A file target, rebuilt when the pins change.
MOTO_VENV := $(ROOT)/_output/moto-venv
MOTO := $(MOTO_VENV)/.installed
.PHONY: moto
moto: $(MOTO)

$(MOTO): tools/moto/requirements.txt
	@python3 -c 'import venv, ensurepip' 2>/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends python3 python3-venv || \
	  { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends python3 python3-venv; }; }
	rm -rf $(MOTO_VENV)
	python3 -m venv $(MOTO_VENV)
	$(MOTO_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r tools/moto/requirements.txt
	$(MOTO_VENV)/bin/python -c 'import moto.server, moto.cloudformation, moto.s3'
	touch $@

clean:
	rm -rf bin _output

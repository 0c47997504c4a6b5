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

.PHONY: all build test unit lint tools quickstart fuzz bench clean

all: build

build:
	$(GO) build -o $(KUBEPLUG) ./cmd/kubeplug

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS)/golangci-lint $(GOLANGCI_LINT)

tools: $(GOLANGCI_LINT)

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

unit:
	$(GO) test ./...

test: lint unit

# The README's main-job command: the furthest real step on the quickstart.
quickstart: build
	$(KUBEPLUG) config validate -f examples/quickstart/cluster.yaml
	$(KUBEPLUG) plugin list -f examples/quickstart/cluster.yaml

clean:
	rm -rf bin _output

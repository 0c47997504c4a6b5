package controlplane

import _ "embed"

// kwokStages are kwok's default stages (sigs.k8s.io/kwok v0.8.0
// kustomize/stage: node/fast, node/heartbeat-with-lease, pod/fast;
// Apache-2.0), what kwokctl configures for a new cluster: simulated nodes become
// Ready and keep their leases, Pods become Ready, Jobs complete. kwok gets them
// as --config, so that a release kwok binary (the download path of
// internal/k8sversions) and the localcluster one behave alike; a release kwok
// without stages refuses to start.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// kwokStagesFile is where Start writes kwokStages in the data directory.
const kwokStagesFile = "kwok-stages.yaml"

// Package aws deploys a rendered cluster to AWS: it uploads the rendered files to
// an S3 bucket by content digest and deploys the cloud template
// (cloud/template.json, the "core" stack) and the stacks plugins add
// (cloud/stacks.json) through CloudFormation change sets. It also builds that
// cloud template (Template, template.go), which render writes for every cluster.
//
// The one idea: every change goes through a change set that is printed before it
// runs. A Deployer creates (or finds, after an interrupted run) one change set per
// stack, reports its changes as a reviewable diff, executes it and streams the
// stack's events until the stack settles; a change set without changes is said to
// be one and deleted. Stacks deploy in dependency order and a stack's parameters
// may take another stack's outputs. What a Deployer created is recorded in its
// state file, so Destroy deletes exactly that — the stacks in reverse order, the
// objects it uploaded, the bucket if it created it — and nothing else. Preview
// says what Deploy would change without changing it; Drift runs CloudFormation's
// drift detection.
//
// The package registers the "aws" provider (spec.provider.aws): kubeplug up
// deploys with a Deployer, kubeplug down destroys, plan --cloud previews and
// diff --live reports drift.
//
// The machines boot the rendered user data, with the provider's part of the
// boot as a cloud gives it: the control-plane machine's facts (Facts: the API
// server on 0.0.0.0, etcd on loopback; render shows them too), and per pool an
// S3 object of boot secrets (bootsecrets.go: the PKI, kubeconfigs, the kubelet's
// configuration, the bootstrap token) encrypted with SSE-KMS under the core
// stack's key and readable by the pool's instance role only (template_boot.go),
// which `kubeplug node fetch-secrets` writes before the boot; the workers'
// bootstrap token, made up front, is stored by the control-plane machine as
// its first act (`kubeplug node store-token`). The provider neither waits for
// the machines nor reaches their API server, and no machine boots in the tests:
// they run against moto's server mode on loopback; docs/aws.md says what moto
// does not model.
package aws

// Package aws is the end-to-end test of the aws provider: `kubeplug up` and
// `kubeplug down` of a cluster with spec.provider.aws against an AWS emulator on
// loopback (moto's server mode, test/harness/testaws), checked through the emulator's
// own API.
package aws

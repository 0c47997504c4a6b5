// Package sdktest helps plugin authors test a plugin the way kubeplug runs it:
// build it, pin its digest in a copy of the package, and run one stage through the
// host's own runtime (exec or grpc, digest check and process isolation included).
package sdktest

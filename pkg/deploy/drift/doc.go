// Package drift tells how a plugin's objects in the cluster differ from what an
// apply would make them: for every object it asks the API server what a forced
// server-side apply would store (a dry run, nothing changes) and reports the
// fields where the live object differs, who changed them (managed fields), and
// the objects that are missing. Fields a plugin declares others may change
// (ssa.Ignore) are not drift; values of Secrets are never reported.
package drift

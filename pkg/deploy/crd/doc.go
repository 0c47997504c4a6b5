// Package crd keeps CustomResourceDefinition upgrades safe: CompareCRDs lists the
// changes between a live definition and a new one that would break existing
// objects or clients (a removed or unserved version that objects are stored in, a
// removed field, a narrowed type, a new required field, a changed scope), and
// Check refuses a plugin whose definitions make any, before anything of it is
// applied — unless the user forces the change.
package crd

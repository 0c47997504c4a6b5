// Package kubeschema checks Kubernetes objects against the schemas of their
// kinds before they reach a cluster, the way kubeconform does, and says where
// each problem is: an unknown field (with the name probably meant), a value
// of the wrong type.
//
// Schemas are structured-merge-diff schemas, the ones server-side apply itself
// uses, from three places: the built-in kinds compiled into client-go and
// apiextensions-apiserver ([Builtin]), the CustomResourceDefinitions a plugin
// ships ([FromCRDs]), and a running cluster's OpenAPI v3, which covers every
// kind it serves, its CRDs included ([Live]).
//
// Validation walks the object and the schema together and reports every
// problem in one pass, each at the JSON pointer of its field, so that a caller
// holding a line-aware document (internal/yamldoc) can name file and line.
// structured-merge-diff's own validation stops a mapping at its first unknown
// field and names fields by paths a user cannot map back to a file.
package kubeschema

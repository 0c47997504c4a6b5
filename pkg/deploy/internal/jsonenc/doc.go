// Package jsonenc writes the plain JSON values that unstructured Kubernetes
// objects hold (maps, lists, strings, booleans, int64 and float64 numbers)
// byte for byte as encoding/json's Marshal does, without reflection: the
// digests kubeplug stamps on applied objects and the objects its release
// records store are written this way, several times faster. Values of any
// other type are left to encoding/json.
package jsonenc

// Package stage is the contract between kubeplug and a plugin's code: the stages,
// the request a plugin receives at each and the response it gives.
//
// It is deliberately small — it depends only on the file formats, the model and
// diagnostics — so that plugins built with the SDK do not link the engine. Every
// runtime (pkg/runtime/...) implements Runtime, and the engine runs plugins only
// through it.
package stage

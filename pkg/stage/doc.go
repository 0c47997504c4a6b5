// Package stage is the contract between kubeplug and a plugin's code: the stages,
// the request a plugin receives at each and the response it gives.
//
// It is deliberately small — it depends only on the file formats, the model and
// diagnostics — so that plugins built with the SDK do not link the engine.
// pkg/engine re-exports these types.
package stage

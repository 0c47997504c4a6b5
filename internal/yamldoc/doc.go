// Package yamldoc parses a YAML document into plain Go values (the shape JSON would
// give) while remembering where every key and value stood, and checks it against a
// JSON Schema, so that every problem is reported as FILE:LINE:COL with the field path.
//
// kubeplug decodes its files in two steps: the schema (generated from the Go types)
// finds every structural problem at once — unknown fields, wrong types, missing
// required fields — and only a document that passes is decoded into Go types.
package yamldoc

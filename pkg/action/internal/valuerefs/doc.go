// Package valuerefs finds the references a Go template makes to values
// (`.Values.a.b`, `$.Values.a.b`) and checks them against what a plugin or
// chart declares: its default values and its values schema.
//
// Templates render with missing keys as empty (text/template's
// missingkey=zero, as Helm does), so that `{{ .Values.x | default "y" }}` and
// `required` work; the price is that a misspelt `{{ .Values.mesage }}` renders
// nothing and says nothing. This package is the static check that pays it
// back: a reference is reported when no default and no schema property could
// ever give it a value, unless the template guards it: it is an argument of
// default, required, hasKey, dig, empty, coalesce or ternary; or an if or with
// tests it (`{{ if .Values.x }}`, also under and, or, not); or it lies inside
// an if or with whose condition names it or a prefix of it. A reference a
// condition uses rather than tests (`{{ if eq .Values.mode "fast" }}`) is
// checked.
//
// Only references whose dot is the root are followed: inside range and with
// the dot is something else, and named templates (define) get whatever dot
// their caller passes; there only `$.Values` counts.
package valuerefs

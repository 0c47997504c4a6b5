package render

import (
	"context"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// WriteFiles replaces dir with files the way Write does: atomically, and only over
// a previous render. Use it for outputs rendered elsewhere, such as the model itself.
func WriteFiles(ctx context.Context, dir string, files map[string][]byte) diag.List {
	var diags diag.List
	leftover, err := writeDir(ctx, dir, files)
	if err != nil {
		diags = append(diags, diag.Diagnostic{Severity: diag.Fatal, File: dir, Message: err.Error()})
	}
	if leftover != nil {
		diags = append(diags, diag.Diagnostic{Severity: diag.Warning, File: dir, Message: leftover.Error()})
	}
	return diags
}

package render

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// opError says which operation of a patch failed and why; missing is set when the
// operation's path (or from) does not exist in the document.
type opError struct {
	Index   int
	Op      model.PatchOp
	Missing bool
	Err     error
}

func (e *opError) Error() string {
	if e.Missing {
		return fmt.Sprintf("op %d (%s %s): path does not exist", e.Index, e.Op.Op, e.Op.Path)
	}
	return fmt.Sprintf("op %d (%s %s): %v", e.Index, e.Op.Op, e.Op.Path, e.Err)
}

func (e *opError) Unwrap() error { return e.Err }

// applyOps applies RFC 6902 operations to a JSON document one at a time, so that a
// failure names the exact operation and path rather than the whole patch.
func applyOps(doc []byte, ops []model.PatchOp) ([]byte, error) {
	opts := jsonpatch.NewApplyOptions()
	for i, op := range ops {
		raw, err := json.Marshal([]map[string]any{opJSON(op)})
		if err != nil {
			return nil, &opError{Index: i, Op: op, Err: fmt.Errorf("encoding the operation: %w", err)}
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, &opError{Index: i, Op: op, Err: fmt.Errorf("decoding the operation: %w", err)}
		}
		out, err := p.ApplyWithOptions(doc, opts)
		if err != nil {
			return nil, &opError{Index: i, Op: op, Missing: errors.Is(err, jsonpatch.ErrMissing), Err: err}
		}
		doc = out
	}
	return doc, nil
}

// opJSON builds the wire form of an operation. Value is written for the operations
// that take one even when it is null, which the model's omitempty would drop.
func opJSON(op model.PatchOp) map[string]any {
	m := map[string]any{"op": op.Op, "path": op.Path}
	switch op.Op {
	case "add", "replace", "test":
		m["value"] = op.Value
	case "move", "copy":
		m["from"] = op.From
	}
	return m
}

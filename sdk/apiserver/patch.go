package apiserver

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// applyPatch applies a JSON merge patch or a JSON patch to a copy of cur. A
// patch type it does not know is an error without an API status (the caller
// answers 415).
func applyPatch(cur *unstructured.Unstructured, contentType string, patch []byte) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	switch types.PatchType(contentType) {
	case types.MergePatchType:
		doc, err = jsonpatch.MergePatch(doc, patch)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(patch); err == nil {
			doc, err = p.Apply(doc)
		}
	default:
		return nil, fmt.Errorf("supported patch types: %s, %s, %s", types.MergePatchType, types.JSONPatchType, types.ApplyPatchType)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("patch: " + err.Error())
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(doc, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return u, nil
}

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hook decides on one admission request.
type Hook interface {
	// Review answers req; the caller sets the response's UID. ctx ends when
	// the API server stops waiting (the webhook's timeoutSeconds). Review
	// must not keep req or write anything outside the response: the API
	// server may call it for a dry run, or call it again.
	Review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// ReviewFunc adapts a function to Hook.
type ReviewFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Review calls f.
func (f ReviewFunc) Review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return f(ctx, req)
}

var _ Hook = ReviewFunc(nil)

// Request is an admission request with its objects decoded as T. Object and
// OldObject shadow the AdmissionRequest's raw fields (still there as
// req.AdmissionRequest.Object).
type Request[T any] struct {
	*admissionv1.AdmissionRequest
	// Object is the object as it would be stored: set on CREATE and UPDATE,
	// nil on DELETE. A mutating hook changes it in place.
	Object *T
	// OldObject is the stored object: set on UPDATE and DELETE, nil on CREATE.
	OldObject *T
}

// Validate makes a validating hook of fn: nil admits the request, an error
// denies it (see errorResponse).
func Validate[T any](fn func(ctx context.Context, req Request[T]) error) Hook {
	return ReviewFunc(func(ctx context.Context, ar *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		req, resp := decode[T](ar)
		if resp != nil {
			return resp
		}
		if err := fn(ctx, req); err != nil {
			return errorResponse(err)
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
}

// Mutate makes a mutating hook of fn: fn changes req.Object in place, and
// the response patches the object with what changed (a JSON patch between the
// object as decoded and as fn left it); an error denies the request as
// Validate's does. On DELETE there is no object to change.
func Mutate[T any](fn func(ctx context.Context, req Request[T]) error) Hook {
	return ReviewFunc(func(ctx context.Context, ar *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		req, resp := decode[T](ar)
		if resp != nil {
			return resp
		}
		var before []byte
		if req.Object != nil {
			var err error
			if before, err = json.Marshal(req.Object); err != nil {
				return status(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode %s: %v", ar.Kind.Kind, err))
			}
		}
		if err := fn(ctx, req); err != nil {
			return errorResponse(err)
		}
		if req.Object == nil {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		after, err := json.Marshal(req.Object)
		if err != nil {
			return status(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode %s: %v", ar.Kind.Kind, err))
		}
		ops, err := jsonpatch.CreatePatch(before, after)
		if err != nil {
			return status(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("patch %s: %v", ar.Kind.Kind, err))
		}
		if len(ops) == 0 {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return status(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("patch %s: %v", ar.Kind.Kind, err))
		}
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
	})
}

// decode decodes the request's objects as T; a response when they are not
// one (400: the rules send the hook a kind it cannot read).
func decode[T any](ar *admissionv1.AdmissionRequest) (Request[T], *admissionv1.AdmissionResponse) {
	req := Request[T]{AdmissionRequest: ar}
	for _, o := range []struct {
		raw  []byte
		into **T
		what string
	}{{ar.Object.Raw, &req.Object, "object"}, {ar.OldObject.Raw, &req.OldObject, "old object"}} {
		if len(o.raw) == 0 {
			continue
		}
		v := new(T)
		if err := json.Unmarshal(o.raw, v); err != nil {
			return req, status(http.StatusBadRequest, metav1.StatusReasonBadRequest,
				fmt.Sprintf("decode the %s (%s %s): %v", o.what, ar.Kind.Kind, name(ar), err))
		}
		*o.into = v
	}
	return req, nil
}

// errorResponse denies with err: an API status (apierrors) keeps its code,
// reason and details; any other error is 403 Forbidden with err's message,
// which the API server shows as `admission webhook "<name>" denied the
// request: <message>`.
func errorResponse(err error) *admissionv1.AdmissionResponse {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return &admissionv1.AdmissionResponse{Result: &s}
	}
	return status(http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
}

func status(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

func name(ar *admissionv1.AdmissionRequest) string {
	if ar.Namespace != "" {
		return ar.Namespace + "/" + ar.Name
	}
	return ar.Name
}

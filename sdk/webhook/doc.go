// Package webhook serves a plugin's admission webhooks — validating and
// mutating — in a few lines of the plugin's own code: decode, decide, patch.
//
//	srv, err := webhook.New(webhook.Options{
//		CertFile: "/serving/tls.crt", KeyFile: "/serving/tls.key",
//		Hooks: map[string]webhook.Hook{
//			"/validate": webhook.Validate(func(ctx context.Context, req webhook.Request[appsv1.Deployment]) error {
//				if req.Object.Spec.Replicas != nil && *req.Object.Spec.Replicas > 10 {
//					return field.Invalid(field.NewPath("spec", "replicas"), *req.Object.Spec.Replicas, "at most 10")
//				}
//				return nil
//			}),
//			"/mutate": webhook.Mutate(func(ctx context.Context, req webhook.Request[appsv1.Deployment]) error {
//				req.Object.Labels["team"] = "unassigned" // the response patches what changed
//				return nil
//			}),
//		},
//	})
//	...
//	err = srv.Run(ctx)
//
// A handler gets the object of the AdmissionReview (admission.k8s.io/v1)
// decoded as its type — a typed object from k8s.io/api, a CRD's Go type, or
// unstructured.Unstructured — and answers with an error or nil. A mutating
// handler changes the object in place; the response carries a JSON patch of
// what it changed, computed between the object as decoded and as left, so
// fields the Go type does not know are never touched. An error denies the
// request with its message: a *field.Error (or field.ErrorList's aggregate)
// names the field as the API server's own messages do, and an apierrors
// status keeps its code and reason.
//
// kubeplug's contributes.kubernetes.webhooks gives the server what it needs:
// the webhook configuration, with its CA bundle filled, pointing at the
// plugin's Service, and the serving certificate Secret <service>-serving-cert
// to mount (re-read here whenever its files change, so certificate rotation
// needs no restart). Its defaults — failurePolicy Ignore, a 5 s timeout, a
// namespace selector leaving out the cluster's own namespaces and the
// webhook's — keep the cluster working when the webhook's Pod is gone
// (docs/served-apis.md).
//
// A request the server cannot read is 400; a handler that panics is a 500
// and logged: for the API server both are the webhook failing, so the
// webhook's failurePolicy decides, not the handler.
package webhook

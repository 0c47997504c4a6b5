// Package apiserver serves a plugin's API group through the cluster's API server
// (API aggregation), in a few dozen lines of the plugin's own code:
//
//	srv, err := apiserver.New(ctx, apiserver.Options{
//		Group: "widgets.example.com", Version: "v1alpha1",
//		Resources: []apiserver.Resource{{Kind: "Widget", Plural: "widgets", Namespaced: true}},
//		CertFile: "/serving/tls.crt", KeyFile: "/serving/tls.key",
//		Client:   kubernetes.NewForConfigOrDie(cfg),
//		Storage:  "widgets-system",
//	})
//	...
//	err = srv.Run(ctx)
//
// The server delegates everything it can to the cluster:
//
//   - authentication: requests proxied by the API server are accepted from the
//     front proxy's client certificate (the CA and header names of the
//     kube-system/extension-apiserver-authentication ConfigMap); bearer tokens go
//     to a TokenReview;
//   - authorization: every request is a SubjectAccessReview for the verb,
//     resource and namespace the URL names (cached briefly);
//   - storage: objects are kept by the cluster's own API server, one Secret (of
//     SecretType) per object in the Storage namespace, so the plugin runs no
//     database and keeps no state; resourceVersions, conflicts and watches are the
//     API server's. Secrets, so that the view role does not read the objects;
//     ConfigMap storage of an earlier version is moved when the server starts.
//
// Clients cannot tell a served kind from a CustomResourceDefinition's: a
// Resource declares what a CRD version would (schema, printer columns, status
// subresource, selectable fields) and the server reuses the
// apiextensions-apiserver's code for it — OpenAPI v3 (kubectl validates and
// explains), Tables, pruning, defaults and validation — with
// k8s.io/apimachinery's field manager for server-side apply, and passes label
// selectors and paging on to the storage's own list.
//
// kubeplug's contributes.kubernetes.apis gives the server what this needs: the
// serving certificate (re-read here whenever its files change, so rotation needs
// no restart), the APIService, and the RBAC for delegation (docs/served-apis.md).
package apiserver

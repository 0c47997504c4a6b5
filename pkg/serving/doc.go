// Package serving turns a plugin's served APIs and admission webhooks into the
// objects every author otherwise writes by hand, and keeps their certificates.
//
// Objects (at initialise, offline) generates, from a plugin's
// contributes.kubernetes.apis and .webhooks: one APIService per group version, a
// Validating- and a MutatingWebhookConfiguration named after the plugin, per
// Service a serving CA Secret and a serving certificate Secret (their data empty:
// keys are never rendered or recorded), and the RBAC of delegated authentication
// and authorization (system:auth-delegator and the
// extension-apiserver-authentication-reader Role) for the server's ServiceAccount.
// The objects that need the CA carry AnnotationInjectCA.
//
// Inject (at deploy, against the live Secrets) fills those Secrets and every
// caBundle: it keeps a CA and a certificate while they are valid, signed as they
// should be and far from expiry, and issues new ones when they are missing,
// broken, for other names or past two thirds of their lifetime. A renewed CA is
// added to the bundle before the certificate it signs is served, and the old CA
// stays in the bundle until it expires, so that neither rotation has an outage
// window: whichever certificate the server presents, the API server trusts it.
//
// RenewAt says when the next apply will renew what a live serving Secret holds;
// kubeplug's controller applies an installation again by then, so that
// certificates are renewed without anyone running apply.
package serving

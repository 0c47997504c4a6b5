// Package redact keeps sensitive values away from everyone but their owner.
//
// A Secrets set holds the sensitive values of a run (every plugin's values at its
// spec.values.sensitive pointers). Text that came from plugin code — its stderr,
// its stdout, its error messages and diagnostics — passes through Secrets.String
// before kubeplug logs or prints it, so a plugin that echoes its request cannot
// leak another plugin's password into a log or a terminal. The set also scrubs
// structured data (Secrets.JSON) such as the model another plugin is shown.
//
// The set travels on the context (NewContext, FromContext) from the engine to the
// runtimes and checks, because those are built by different callers and the
// values are only known once the plan is made.
//
// Values shorter than MinLen bytes are not scrubbed from free text: replacing
// every "on" or "80" would garble output without protecting anything. They are
// still redacted structurally wherever values are shown (pkg/values.Redact).
package redact

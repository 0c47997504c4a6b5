// Package seal keeps sensitive values out of the release records kubeplug and
// Helm store in a cluster, while keeping those records replayable.
//
// A record (kubeplug's chunk of applied objects, a Helm release) holds what was
// applied, and a plugin's Secret holds its sensitive values: stored as is, every
// `kubectl get secret -o yaml` of the release history, `helm get values` and
// backup of the namespace would show them. Redacting them instead would break a
// rollback, which re-applies what a revision recorded.
//
// So a Sealer replaces every form of every sensitive value (as is, JSON-quoted,
// base64: see redact.Secrets.Forms) with a token,
//
//	kubeplug-sealed.<base64url(nonce ‖ AES-256-GCM ciphertext)>.
//
// before a record is written, and turns tokens back into the values when one is
// read. The key is 32 random bytes in one Secret of kubeplug's namespace
// (KeySecret), created on the first write that seals something: a cluster where
// no plugin has sensitive values never gets one, and records without tokens are
// read as they are. Encryption is deterministic (the nonce is an HMAC of the
// value), so the same content seals to the same bytes: kubeplug names record
// chunks by their digest and compares them.
//
// Values a Sealer reveals while reading are added to its set, so that a rollback
// that writes a recorded revision again seals them again, whether or not the
// current cluster file still names them.
package seal

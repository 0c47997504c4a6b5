// Package servingcert serves a certificate from the files of a mounted Secret
// and re-reads them when they change, for the SDK's servers (sdk/apiserver,
// sdk/webhook): kubeplug renews the serving Secret, the kubelet updates the
// mounted files, and the next TLS handshake presents the new certificate, with
// no restart.
package servingcert

package oci

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/kubeplug/kubeplug/internal/redact"
)

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 10

// CheckTransport is the transport policy of every URL kubeplug fetches from a
// catalog or a registry — the one the user wrote, an index entry's, a
// redirect's: https, or plain http to a loopback address only.
func CheckTransport(u *url.URL) error {
	switch {
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%s: plain http is accepted for loopback addresses only; use https", redact.URL(u.String()))
	}
	return fmt.Errorf("%s: expected an https:// URL (or plain http to a loopback address)", redact.URL(u.String()))
}

// CheckRedirect is an http.Client's CheckRedirect that holds a redirect to the
// transport policy of the request it redirects: [CheckTransport], except that
// plain http stays allowed to the very host the user chose plain http for
// (--plain-http). A downgrade to plain http elsewhere is refused naming both
// URLs, and at most maxRedirects are followed.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme == "http" && first.Scheme == "http" && req.URL.Host == first.Host {
		return nil
	}
	if err := CheckTransport(req.URL); err != nil {
		return fmt.Errorf("%s redirected to %w", redact.URL(via[len(via)-1].URL.String()), err)
	}
	return nil
}

package redact

import (
	"net/url"
	"regexp"
)

// URL returns raw with the password of its userinfo replaced by Mask
// (https://user:***@host/…), the form every URL kubeplug prints takes: a catalog
// or registry URL given with credentials must not leave them in an error, a log
// or a listing. Text that does not parse as a URL is scrubbed as [URLs] does.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return URLs(raw)
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	u.User = url.UserPassword(u.User.Username(), Mask)
	// url.URL.String escapes the mask; spell it plainly.
	return passwordRE.ReplaceAllString(u.String(), "${1}:"+Mask+"@")
}

// passwordRE matches the userinfo of a URL that has a password: "//USER:PASSWORD@".
var passwordRE = regexp.MustCompile(`(//[^/?#@:\s]*):[^/?#@\s]*@`)

// URLs returns text with the password of every URL in it (scheme://user:password@)
// replaced by Mask.
func URLs(text string) string {
	return passwordRE.ReplaceAllString(text, "${1}:"+Mask+"@")
}

// URLError returns err with the passwords of the URLs in its text masked (see
// [URLs]), still unwrapping to err; err itself when there are none.
func URLError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := URLs(msg); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

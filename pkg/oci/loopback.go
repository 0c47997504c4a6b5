package oci

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// IsLoopback says whether host — a host name or IP address, with or without a
// port, as a registry or URL names it — is this machine's loopback: localhost
// (and its subdomains), 127.0.0.0/8 or ::1. Such a registry or catalog is spoken
// to in plain HTTP: a registry on loopback is a local or test one, with no
// certificate to check, and its traffic never leaves the machine. Every place
// kubeplug talks to a registry or catalog asks this one function.
func IsLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil { // a bare IPv6 address: no port to cut
		return ip.IsLoopback()
	}
	if u, err := url.Parse("//" + host); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// probeTimeout bounds the question plainHTTP asks a loopback registry.
const probeTimeout = 5 * time.Second

// plainHTTP says whether the client talks plain HTTP to registry (HOST[:PORT]):
// when Options.PlainHTTP says so, and on loopback (IsLoopback) when the
// registry does not speak TLS — asked once per registry with an HTTPS request
// to /v2/, as Docker does for a loopback registry: a registry on loopback
// serving TLS (with a certificate given by --ca-file) is still spoken to, and
// checked, over HTTPS.
func (c *Client) plainHTTP(registry string) bool {
	if c.opts.PlainHTTP {
		return true
	}
	if !IsLoopback(registry) {
		return false
	}
	if v, ok := c.plain.Load(registry); ok {
		return v.(bool)
	}
	plain := false
	resp, err := c.probe.Get("https://" + registry + "/v2/")
	if err == nil {
		_ = resp.Body.Close()
	} else {
		plain = strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
	}
	c.plain.Store(registry, plain)
	return plain
}

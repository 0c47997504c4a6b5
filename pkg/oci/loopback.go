package oci

import (
	"net"
	"net/url"
	"strings"
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

// plainHTTP says whether the client talks plain HTTP to registry (HOST[:PORT]):
// when Options.PlainHTTP says so, and always on loopback (IsLoopback).
func (c *Client) plainHTTP(registry string) bool {
	return c.opts.PlainHTTP || IsLoopback(registry)
}

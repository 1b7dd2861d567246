package main

import (
	"fmt"

	"github.com/verifierd/verifierd/internal/netaddr"
)

// checkListenSecurity is the start-up check on the API's exposure. On a
// non-loopback address the daemon needs both a bearer token and TLS, or the
// operator's explicit --insecure; a token without TLS (which would travel
// in plaintext) is served with a warning. It returns the warning to log.
func checkListenSecurity(addr string, token, tls, insecure bool) (warning string, err error) {
	if netaddr.IsLoopback(addr) {
		if token && !tls {
			return "the API token travels in plaintext; fine on loopback, set api.tls_cert_file/api.tls_key_file before exposing the API", nil
		}
		return "", nil
	}
	if token && tls {
		return "", nil
	}
	var missing string
	switch {
	case !token && !tls:
		missing = "no bearer token and no TLS"
	case !token:
		missing = "no bearer token"
	default:
		missing = "no TLS, so the bearer token would travel in plaintext"
	}
	if insecure {
		return fmt.Sprintf("serving %s with %s because of --insecure: anyone who can reach it can begin and read sessions", addr, missing), nil
	}
	return "", fmt.Errorf("--listen %s is reachable from the network but the API has %s; set api.bearer_token_env and api.tls_cert_file/api.tls_key_file in the daemon config, listen on 127.0.0.1, or pass --insecure to serve it anyway", addr, missing)
}

package main

import (
	"fmt"

	"github.com/verifierd/verifierd/internal/netaddr"
)

// checkTokenTransport refuses to send the bearer token in plaintext to an
// address reachable from the network: without --tls-ca the connection is
// plaintext, and anyone on the path would read the token.
func (c *clientFlags) checkTokenTransport() error {
	if c.tokenEnv == "" || c.caFile != "" || c.insecure || netaddr.IsLoopback(c.addr) {
		return nil
	}
	return fmt.Errorf("refusing to send the token from --token-env %s in plaintext to %s; give --tls-ca FILE to verify the daemon's TLS, or --insecure to send it anyway", c.tokenEnv, c.addr)
}

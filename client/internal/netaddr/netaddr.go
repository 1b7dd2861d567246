// Package netaddr answers the one question the client asks of an address
// before a token travels in plaintext: does it name only this machine?
// It is the client module's copy of the daemon's internal/netaddr (the
// client does not require the daemon's module); a test in the daemon's
// module keeps the two the same below the package clause.
package netaddr

import (
	"net"
	"strings"
)

// IsLoopback reports whether addr (HOST:PORT or HOST) names only this
// machine: localhost or a loopback IP. An empty host (":7443"), 0.0.0.0,
// :: and every other name count as reachable from the network.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

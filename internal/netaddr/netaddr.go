// Package netaddr answers the one question the daemon and its CLI both ask
// of an address before a secret travels: does it name only this machine?
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

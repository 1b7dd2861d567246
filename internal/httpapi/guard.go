package httpapi

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/verifierd/verifierd/internal/netaddr"
)

// Hosts is the listener's Host allowlist beyond the loopback names, parsed
// from --http-allowed-hosts. An entry without a port admits that host on
// any port; one with a port admits only that port. Names compare without
// regard to case.
type Hosts struct {
	any   map[string]bool // host, any port
	exact map[string]bool // host:port
}

// ParseHosts parses a comma-separated list of host or host:port entries
// (IPv6 literals in brackets: [2001:db8::1] or [2001:db8::1]:7444). An
// empty list admits loopback names only.
func ParseHosts(list string) (Hosts, error) {
	h := Hosts{any: map[string]bool{}, exact: map[string]bool{}}
	for raw := range strings.SplitSeq(list, ",") {
		e := strings.ToLower(strings.TrimSpace(raw))
		if e == "" {
			continue
		}
		if strings.ContainsAny(e, "/@ *") {
			return Hosts{}, fmt.Errorf("--http-allowed-hosts: %q is not a host or host:port (no scheme, path or wildcard)", raw)
		}
		if host, port, err := net.SplitHostPort(e); err == nil {
			if host == "" || port == "" {
				return Hosts{}, fmt.Errorf("--http-allowed-hosts: %q needs both a host and a port, or just the host", raw)
			}
			h.exact[net.JoinHostPort(host, port)] = true
			continue
		}
		if strings.Count(e, ":") > 1 && !strings.HasPrefix(e, "[") {
			return Hosts{}, fmt.Errorf("--http-allowed-hosts: %q: write an IPv6 address in brackets, e.g. [%s]", raw, e)
		}
		h.any[strings.Trim(e, "[]")] = true
	}
	return h, nil
}

// Allowed reports whether hostport (a Host header, or the host of an
// Origin) is a loopback name or address, or is on the list.
func (h Hosts) Allowed(hostport string) bool {
	hostport = strings.ToLower(strings.TrimSpace(hostport))
	if hostport == "" {
		return false
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), ""
	}
	host = strings.TrimSuffix(host, ".")
	if netaddr.IsLoopback(host) {
		return true
	}
	if h.any[host] {
		return true
	}
	return port != "" && h.exact[net.JoinHostPort(host, port)]
}

// listed reports whether hostport is on the operator's list (loopback
// names not counting).
func (h Hosts) listed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), ""
	}
	return h.any[host] || (port != "" && h.exact[net.JoinHostPort(host, port)])
}

// stateChanging reports whether method may change state (every method but
// GET, HEAD and OPTIONS).
func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// checkHost is the first browser check every request passes (docs/daemon.md,
// "The HTTP listener and browsers"): Host must be a loopback name or
// address or on --http-allowed-hosts, else 421. A page that rebinds its
// own DNS name to 127.0.0.1 reaches the listener under that name and is
// answered nothing, the console included. A request that carries the API's
// bearer token passes: a page cannot attach it. It writes the refusal and
// returns false, or returns true.
func (a *API) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if a.hosts.Allowed(r.Host) || (a.token != "" && a.authorized(r)) {
		return true
	}
	WriteError(w, http.StatusMisdirectedRequest, "misdirected_request",
		fmt.Sprintf("this listener does not answer for host %q; use 127.0.0.1 or localhost, or start the daemon with --http-allowed-hosts naming it", r.Host))
	return false
}

// checkWrite is the browser check on a state-changing request to a route:
//
//   - from a browser it must come from the listener's own origin (or a host
//     on the list), else 403: an Origin of another host or port, or
//     Sec-Fetch-Site: cross-site;
//   - it must say Content-Type: application/json, else 415: a browser sends
//     text/plain and form bodies cross-origin without asking, but a JSON
//     one only after a CORS preflight, which the listener never approves.
//
// It writes the refusal and returns false, or returns true.
func (a *API) checkWrite(w http.ResponseWriter, r *http.Request) bool {
	if !stateChanging(r.Method) {
		return true
	}
	if site := r.Header.Get("Sec-Fetch-Site"); strings.EqualFold(site, "cross-site") {
		WriteError(w, http.StatusForbidden, "cross_site_request", "a state-changing request from another site's page is refused (Sec-Fetch-Site: cross-site)")
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" && !a.sameOrigin(origin, r) {
		WriteError(w, http.StatusForbidden, "cross_origin_request",
			fmt.Sprintf("a state-changing request from the page at %q is refused: only the listener's own origin or a host on --http-allowed-hosts may send one", origin))
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		WriteError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Sprintf("%s %s takes a JSON body: send 'Content-Type: application/json' (got %q)", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
		return false
	}
	return true
}

// sameOrigin reports whether the Origin header names this listener as the
// request reached it (same host and port as Host), or a host the operator
// listed. Another loopback port is another origin: a local development
// server's page is refused like any site's.
func (a *API) sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes "null": sandboxed frames, file: pages
	}
	if a.hosts.listed(u.Host) {
		return true
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(r.Host, schemeOf(r)))
}

func schemeOf(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// withPort returns hostport with the scheme's default port when it has none.
func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(hostport)
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return strings.ToLower(net.JoinHostPort(strings.Trim(hostport, "[]"), port))
}

package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/verifierd/verifierd/internal/connlimit"
	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/server"
)

// connLimits are the bounds on the connections of every listener
// (docs/operations.md, "Connections"): --max-connections per listener, how
// long a connection may take to send its first request (TLS handshake, the
// HTTP/2 preface, an HTTP request's headers), how long one may sit idle,
// how long an HTTP request may take to arrive whole and how fast its body
// must come, the allowance of connections not yet authenticated, and the
// calls one gRPC connection may carry at once.
type connLimits struct {
	maxConnections          int
	handshakeTimeout        time.Duration
	idleTimeout             time.Duration
	httpReadTimeout         time.Duration
	minBodyRate             int64
	maxUnauthenticatedPerIp int
	maxUnauthenticated      int
	maxStreamsPerConnection int

	mu        sync.Mutex
	listeners map[string]*connlimit.Listener // by name: grpc, http, health
}

func connFlags(fs *flag.FlagSet) *connLimits {
	c := &connLimits{}
	fs.IntVar(&c.maxConnections, "max-connections", 1024, "connections each listener (gRPC, HTTP, health) holds at most; at the limit an idle or still-handshaking one is closed to make room, and a new one is closed only when all are busy")
	fs.DurationVar(&c.handshakeTimeout, "handshake-timeout", 10*time.Second, "how long a new connection may take to finish its TLS handshake and send the HTTP/2 preface (gRPC) or a request's headers (HTTP) before it is closed")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "close a connection with no call in flight (gRPC) or no request (HTTP keep-alive) after this long")
	fs.DurationVar(&c.httpReadTimeout, "http-read-timeout", 30*time.Second, "how long one HTTP request, headers and body, may take to arrive")
	fs.Int64Var(&c.minBodyRate, "min-body-rate", defaultMinBodyRate, "bytes a second an HTTP request body or gRPC request message must keep up after its first 5s; a slower body is cut with 408, a gRPC message not in within 5s plus its method's largest message at this rate with DeadlineExceeded (0: no minimum)")
	fs.IntVar(&c.maxUnauthenticatedPerIp, "max-unauthenticated-per-ip", 128, "connections not yet authenticated that one address may hold on each listener; past it the oldest idle one is closed (0: no bound)")
	fs.IntVar(&c.maxUnauthenticated, "max-unauthenticated", 512, "connections not yet authenticated that each listener holds in all; past it the oldest idle one is closed (0: no bound)")
	fs.IntVar(&c.maxStreamsPerConnection, "max-streams-per-connection", 64, "gRPC calls one connection may have in flight at once; more are refused (REFUSED_STREAM)")
	return c
}

// defaultMinBodyRate is --min-body-rate's default: 64 KiB a second, a
// 16 MiB body in about four minutes, far slower than any real client.
const defaultMinBodyRate = 64 << 10

// bodyGrace is how long a body may take before the minimum rate applies.
const bodyGrace = 5 * time.Second

// bodyLimits are the HTTP listener's body pacing (httpapi.SetBodyLimits).
func (c *connLimits) bodyLimits() httpapi.BodyLimits {
	return httpapi.BodyLimits{MinRate: c.minBodyRate, Grace: bodyGrace, ReadTimeout: c.httpReadTimeout}
}

// messagePace is the gRPC listener's message pacing (server.Options.Pace):
// the same rate and grace as HTTP bodies.
func (c *connLimits) messagePace() server.MessagePace {
	return server.MessagePace{MinRate: c.minBodyRate, Grace: bodyGrace}
}

func (c *connLimits) check() error {
	if c.maxConnections < 1 {
		return fmt.Errorf("--max-connections %d: give at least 1 (the default is 1024)", c.maxConnections)
	}
	for name, d := range map[string]time.Duration{"--handshake-timeout": c.handshakeTimeout, "--idle-timeout": c.idleTimeout, "--http-read-timeout": c.httpReadTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s %s: give a positive duration such as 10s", name, d)
		}
	}
	for name, n := range map[string]int64{"--min-body-rate": c.minBodyRate, "--max-unauthenticated-per-ip": int64(c.maxUnauthenticatedPerIp), "--max-unauthenticated": int64(c.maxUnauthenticated)} {
		if n < 0 {
			return fmt.Errorf("%s %d: give 0 (no bound) or a positive number", name, n)
		}
	}
	if c.maxStreamsPerConnection < 1 {
		return fmt.Errorf("--max-streams-per-connection %d: give at least 1 (the default is 64)", c.maxStreamsPerConnection)
	}
	return nil
}

// grpcListener bounds a gRPC listener, and returns the server options that
// go with it: the handshake and idle bounds, the calls a connection may
// carry at once, the keepalive pings that find a peer gone without a word
// (and the policy that closes a client pinging more often than every 30s),
// and the stats handler that tells the listener which connections have a
// call in flight. l may be nil when the
// server is built before its address is bound; set the returned
// Listener's Listener field then, before serving.
func (c *connLimits) grpcListener(name string, l net.Listener) (*connlimit.Listener, []grpc.ServerOption) {
	lim := c.track(name, c.limit(l))
	return lim, []grpc.ServerOption{
		grpc.StatsHandler(lim.StatsHandler()),
		grpc.ConnectionTimeout(c.handshakeTimeout),
		grpc.MaxConcurrentStreams(uint32(c.maxStreamsPerConnection)),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.idleTimeout, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second}),
	}
}

// limit bounds l to --max-connections, with the unauthenticated allowance.
func (c *connLimits) limit(l net.Listener) *connlimit.Listener {
	lim := connlimit.New(l, c.maxConnections)
	lim.SetUnauthenticated(c.maxUnauthenticatedPerIp, c.maxUnauthenticated)
	return lim
}

// httpServer bounds an HTTP server and returns the listener to serve it
// on: a connection is busy from a request's first headers until its
// response is sent; its headers are at most maxHeaderBytes, and its
// requests' contexts carry it so that the API can mark it authenticated.
func (c *connLimits) httpServer(hs *http.Server, l net.Listener) net.Listener {
	hs.ReadHeaderTimeout = c.handshakeTimeout
	hs.MaxHeaderBytes = maxHeaderBytes
	hs.ConnContext = connlimit.WithConn
	hs.ReadTimeout = c.httpReadTimeout
	hs.IdleTimeout = c.idleTimeout
	hs.ConnState = func(conn net.Conn, s http.ConnState) {
		switch s {
		case http.StateActive:
			connlimit.MarkBusy(conn)
		case http.StateIdle:
			connlimit.MarkIdle(conn)
		}
	}
	return c.track("http", c.limit(l))
}

func (c *connLimits) track(name string, l *connlimit.Listener) *connlimit.Listener {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listeners == nil {
		c.listeners = map[string]*connlimit.Listener{}
	}
	c.listeners[name] = l
	return l
}

// maxHeaderBytes bounds an HTTP request's headers: all an unauthenticated
// request may make the daemon hold.
const maxHeaderBytes = 64 << 10

var (
	connOpenDesc    = prometheus.NewDesc(metrics.Namespace+"_connections_open", "Connections a listener holds now (at most --max-connections).", []string{"listener"}, nil)
	connEvictedDesc = prometheus.NewDesc(metrics.Namespace+"_connections_evicted_total", "Idle or still-handshaking connections a listener at its --max-connections closed to make room for a new one.", []string{"listener"}, nil)
	connShedDesc    = prometheus.NewDesc(metrics.Namespace+"_connections_shed_total", "New connections a listener closed at once because all --max-connections held ones were busy.", []string{"listener"}, nil)
)

// Describe and Collect make the listeners' counts metrics
// (verifierd_connections_*, by listener: grpc, http, health).
func (c *connLimits) Describe(ch chan<- *prometheus.Desc) {
	ch <- connOpenDesc
	ch <- connEvictedDesc
	ch <- connShedDesc
}

// Collect: see Describe.
func (c *connLimits) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.listeners {
		ch <- prometheus.MustNewConstMetric(connOpenDesc, prometheus.GaugeValue, float64(l.Open()), name)
		ch <- prometheus.MustNewConstMetric(connEvictedDesc, prometheus.CounterValue, float64(l.Evicted()), name)
		ch <- prometheus.MustNewConstMetric(connShedDesc, prometheus.CounterValue, float64(l.Shed()), name)
	}
}

// Package connlimit bounds the connections one listener of the daemon holds
// open (--max-connections) without ever refusing to accept: a listener
// that stopped accepting at its limit (as netutil.LimitListener does) would
// leave new clients, health probes included, in the kernel's queue until
// some connection ended, which idle ones may not do for minutes.
//
// Instead the listener always accepts. Below the limit the connection is
// kept. At the limit it makes room by closing the oldest connection that
// is doing nothing for anyone: one still in its handshake or idle between
// requests (no HTTP request being served, no gRPC call in flight). Only when every
// held connection is busy is the new one closed at once. So a flood of
// idle or half-open connections cannot lock a real client out, and the
// daemon never holds more than the limit (plus the one being decided).
//
// Connections that have not yet shown the API's token have a smaller
// allowance besides (SetUnauthenticated): at most so many from one
// address and so many in all. Past it the oldest idle unauthenticated one
// (of that address, or of all) is closed to make room, or the new one
// when none is idle. A connection leaves the allowance once a request on
// it passed the token check (MarkAuthenticated).
package connlimit

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// Listener is a net.Listener holding at most Max connections.
type Listener struct {
	net.Listener
	max int

	mu     sync.Mutex
	conns  []*Conn          // oldest first
	byAddr map[string]*Conn // by the peer's address, for StatsHandler

	// perIP and total bound the unauthenticated connections (0: no bound).
	perIP, total int

	evicted atomic.Int64
	shed    atomic.Int64
}

// SetUnauthenticated bounds the connections not yet authenticated: at most
// perIP from one address and total in all (0 leaves either unbounded).
// Call it before serving.
func (l *Listener) SetUnauthenticated(perIP, total int) {
	l.perIP, l.total = perIP, total
}

// New bounds l to limit connections (limit < 1 means 1). A connection counts
// as idle, and so may be closed to make room, except between MarkBusy and
// MarkIdle (an HTTP server's connection states) or while a gRPC call is in
// flight on it (StatsHandler).
func New(l net.Listener, limit int) *Listener {
	return &Listener{Listener: l, max: max(limit, 1), byAddr: map[string]*Conn{}}
}

// Accept waits for the next connection and returns it once there is room
// for it, closing an idle one if need be.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: raw, l: l, host: hostOf(raw.RemoteAddr())}
		c.idle.Store(true)
		l.mu.Lock()
		victims, ok := l.makeRoom(c)
		if !ok {
			l.mu.Unlock()
			l.shed.Add(1)
			raw.Close()
			continue
		}
		for _, v := range victims {
			l.drop(v)
		}
		l.conns = append(l.conns, c)
		l.byAddr[raw.RemoteAddr().String()] = c
		l.mu.Unlock()
		for _, v := range victims {
			l.evicted.Add(1)
			v.removed.Store(true)
			v.Conn.Close()
		}
		return c, nil
	}
}

// makeRoom picks the connections to close so that c fits: past perIP
// unauthenticated ones from c's address, past total unauthenticated ones,
// past max in all, it closes one, a refused one (MarkRefused) first, then
// the oldest idle one among those counted. Refused connections count
// only against max: they are being closed. ok is false when a bound has
// no connection to give. l.mu is held.
func (l *Listener) makeRoom(c *Conn) (victims []*Conn, ok bool) {
	chosen := func(o *Conn) bool { return slices.Contains(victims, o) }
	pick := func(match func(*Conn) bool, limit int, countRefused bool) bool {
		if limit <= 0 {
			return true
		}
		n, nRefused := 0, 0
		var refused, oldest *Conn
		for _, o := range l.conns {
			switch {
			case chosen(o):
			case o.refused.Load():
				nRefused++
				if refused == nil {
					refused = o
				}
			case match(o):
				n++
				if oldest == nil && o.idle.Load() {
					oldest = o
				}
			}
		}
		if countRefused {
			n += nRefused
		}
		if n < limit {
			return true
		}
		victim := cmp.Or(refused, oldest)
		if victim == nil {
			return false
		}
		victims = append(victims, victim)
		return true
	}
	unauth := func(o *Conn) bool { return !o.authed.Load() }
	ok = pick(func(o *Conn) bool { return unauth(o) && o.host == c.host }, l.perIP, false) &&
		pick(unauth, l.total, false) &&
		pick(func(*Conn) bool { return true }, l.max, true)
	return victims, ok
}

// drop removes v from the held connections; l.mu is held.
func (l *Listener) drop(v *Conn) {
	if i := slices.Index(l.conns, v); i >= 0 {
		l.conns = slices.Delete(l.conns, i, i+1)
	}
	l.forget(v)
}

// hostOf is the address part of a peer's address (the port dropped).
func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Open is how many connections the listener holds now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Evicted is how many idle or handshaking connections were closed to make
// room; Shed is how many new ones were closed because every held one was
// busy.
func (l *Listener) Evicted() int64 { return l.evicted.Load() }

// Shed: see Evicted.
func (l *Listener) Shed() int64 { return l.shed.Load() }

func (l *Listener) remove(c *Conn) {
	if c.removed.Swap(true) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(c)
}

// forget drops c from byAddr; l.mu is held.
func (l *Listener) forget(c *Conn) {
	addr := c.RemoteAddr().String()
	if l.byAddr[addr] == c {
		delete(l.byAddr, addr)
	}
}

// Conn is one held connection.
type Conn struct {
	net.Conn
	l       *Listener
	calls   atomic.Int64 // gRPC calls in flight
	idle    atomic.Bool
	removed atomic.Bool
	authed  atomic.Bool
	refused atomic.Bool
	host    string
}

// Close closes the connection and frees its place.
func (c *Conn) Close() error {
	c.l.remove(c)
	return c.Conn.Close()
}

// MarkBusy says the connection is serving a request: it is not closed to
// make room. MarkIdle says it waits for the next request.
func MarkBusy(c net.Conn) { setIdle(c, false) }

// MarkIdle: see MarkBusy.
func MarkIdle(c net.Conn) { setIdle(c, true) }

func setIdle(c net.Conn, idle bool) {
	if lc := held(c); lc != nil {
		lc.idle.Store(idle)
	}
}

// held is the listener's Conn under c (a TLS connection unwrapped), or nil.
func held(c net.Conn) *Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*Conn)
	return lc
}

// WithConn returns ctx carrying c, for MarkAuthenticated: an HTTP server's
// ConnContext. gRPC's contexts carry it through StatsHandler.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	if lc := held(c); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// MarkRefused says a request on ctx's connection was refused for want of
// the token and the connection is being closed: it no longer counts
// against the unauthenticated allowance, and is the first to close when
// room is needed.
func MarkRefused(ctx context.Context) {
	if c, _ := ctx.Value(connKey{}).(*Conn); c != nil {
		c.refused.Store(true)
	}
}

// MarkAuthenticated says a request on ctx's connection passed the token
// check: the connection leaves the unauthenticated allowance. A context
// without a held connection is ignored.
func MarkAuthenticated(ctx context.Context) {
	if c, _ := ctx.Value(connKey{}).(*Conn); c != nil {
		c.authed.Store(true)
	}
}

// StatsHandler is the gRPC server option's half of the listener
// (grpc.StatsHandler): it marks a connection busy while a call is in
// flight on it, and idle when none is. A connection that never begins a
// call (an idle flood, a half-sent preface) stays idle and makes room.
func (l *Listener) StatsHandler() stats.Handler { return statsHandler{l} }

type statsHandler struct{ l *Listener }

type connKey struct{}

func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if info.RemoteAddr == nil {
		return ctx
	}
	h.l.mu.Lock()
	c := h.l.byAddr[info.RemoteAddr.String()]
	h.l.mu.Unlock()
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, _ := ctx.Value(connKey{}).(*Conn)
	if c == nil {
		return
	}
	switch s.(type) {
	case *stats.Begin:
		c.calls.Add(1)
		c.idle.Store(false)
	case *stats.End:
		if c.calls.Add(-1) <= 0 {
			c.idle.Store(true)
		}
	}
}

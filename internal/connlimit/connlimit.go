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
package connlimit

import (
	"context"
	"crypto/tls"
	"net"
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

	evicted atomic.Int64
	shed    atomic.Int64
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
		c := &Conn{Conn: raw, l: l}
		c.idle.Store(true)
		l.mu.Lock()
		var victim *Conn
		if len(l.conns) >= l.max {
			for i, o := range l.conns {
				if o.idle.Load() {
					victim = o
					l.conns = append(l.conns[:i], l.conns[i+1:]...)
					l.forget(o)
					break
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.shed.Add(1)
				raw.Close()
				continue
			}
		}
		l.conns = append(l.conns, c)
		l.byAddr[raw.RemoteAddr().String()] = c
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.removed.Store(true)
			victim.Conn.Close()
		}
		return c, nil
	}
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
	l.forget(c)
	for i, o := range l.conns {
		if o == c {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			return
		}
	}
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
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*Conn); ok {
		lc.idle.Store(idle)
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

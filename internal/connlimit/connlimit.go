// Package connlimit bounds the connections one listener of the daemon holds
// open (--max-connections) without ever refusing to accept: a listener
// that stopped accepting at its limit (as netutil.LimitListener does) would
// leave new clients, health probes included, in the kernel's queue until
// some connection ended, which idle ones may not do for minutes.
//
// Instead the listener always accepts. Below the limit the connection is
// kept. At the limit it makes room by closing the oldest connection that
// is doing nothing for anyone: one still in its handshake (no complete
// request or HTTP/2 preface yet) or idle between requests. Only when every
// held connection is busy is the new one closed at once. So a flood of
// idle or half-open connections cannot lock a real client out, and the
// daemon never holds more than the limit (plus the one being decided).
package connlimit

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// Listener is a net.Listener holding at most Max connections.
type Listener struct {
	net.Listener
	max int
	// provenAfter, when positive, is how many bytes a connection must send
	// before it counts as busy (the HTTP/2 client preface and its first
	// frame header, for gRPC). Zero: only MarkBusy/MarkIdle say so (the
	// HTTP server's connection states).
	provenAfter int64

	mu    sync.Mutex
	conns []*Conn // oldest first

	evicted atomic.Int64
	shed    atomic.Int64
}

// New bounds l to limit connections (limit < 1 means 1). A connection counts
// as idle, and so may be closed to make room, until MarkBusy, or until it
// has sent provenAfter bytes when that is positive.
func New(l net.Listener, limit int, provenAfter int64) *Listener {
	return &Listener{Listener: l, max: max(limit, 1), provenAfter: provenAfter}
}

// GRPCPreface is what a gRPC client sends before it is served: the 24-byte
// HTTP/2 client preface and the 9-byte header of its SETTINGS frame. A
// connection that has not sent it yet is still in its handshake.
const GRPCPreface = 24 + 9

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
	for i, o := range l.conns {
		if o == c {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			return
		}
	}
}

// Conn is one held connection.
type Conn struct {
	net.Conn
	l       *Listener
	read    atomic.Int64
	idle    atomic.Bool
	removed atomic.Bool
}

// Read counts the bytes a connection sent until it proves itself.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.l.provenAfter > 0 && n > 0 && c.idle.Load() {
		if c.read.Add(int64(n)) >= c.l.provenAfter {
			c.idle.Store(false)
		}
	}
	return n, err
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

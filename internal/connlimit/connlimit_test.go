package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serve accepts on l and echoes what each connection sends; a connection
// whose first byte is 'B' is marked busy, as a server serving it would,
// one whose first byte is 'A' authenticated.
func serve(t *testing.T, l *Listener) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var first [1]byte
				if _, err := io.ReadFull(c, first[:]); err != nil {
					return
				}
				if first[0] == 'B' {
					MarkBusy(c)
				}
				if first[0] == 'A' {
					MarkAuthenticated(WithConn(context.Background(), c))
				}
				if _, err := c.Write(first[:]); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closed reports whether the server has closed c (reads EOF or a reset
// within the wait).
func closed(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [64]byte
	for {
		_, err := c.Read(b[:]) // an echo of what it sent is skipped
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return false
		}
		if err != nil {
			return true
		}
	}
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("writing: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

func waitOpen(t *testing.T, l *Listener, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for l.Open() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the listener holds %d connections, want %d", l.Open(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// At the limit, the oldest idle connection makes room; busy ones stay;
// when every one is busy, the newcomer is closed.
func TestIdleMakeRoom(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, 3)
	defer l.Close()
	serve(t, l)
	addr := raw.Addr().String()

	busy := dial(t, addr)
	echo(t, busy, "Busy")
	idle1 := dial(t, addr)
	waitOpen(t, l, 2)
	idle2 := dial(t, addr)
	_, _ = idle2.Write([]byte("ab")) // half a preface
	waitOpen(t, l, 3)

	late := dial(t, addr)
	echo(t, late, "Blate") // served: idle1 made room
	if !closed(idle1, time.Second) {
		t.Error("the oldest idle connection was not closed to make room")
	}
	if closed(idle2, 100*time.Millisecond) {
		t.Error("a younger idle connection was closed too")
	}
	late2 := dial(t, addr)
	echo(t, late2, "Bagain")
	if !closed(idle2, time.Second) {
		t.Error("the half-preface connection was not closed to make room")
	}
	echo(t, busy, "Busy")
	// Now busy, late and late2 are busy: a newcomer is closed.
	shed := dial(t, addr)
	if !closed(shed, 2*time.Second) {
		t.Error("a connection beyond the limit of busy ones was kept")
	}
	if l.Open() != 3 || l.Evicted() != 2 || l.Shed() != 1 {
		t.Errorf("open %d evicted %d shed %d, want 3 2 1", l.Open(), l.Evicted(), l.Shed())
	}
	// A connection that ends frees its place.
	late.Close()
	waitOpen(t, l, 2)
	echo(t, dial(t, addr), "Room")
}

// MarkBusy and MarkIdle decide for a listener without a byte threshold.
func TestMarks(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, 1)
	defer l.Close()
	addr := raw.Addr().String()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	first := dial(t, addr)
	c1 := <-accepted
	MarkBusy(c1)
	second := dial(t, addr)
	if !closed(second, 2*time.Second) {
		t.Error("a newcomer was kept while the only connection is busy")
	}
	MarkIdle(c1)
	third := dial(t, addr)
	<-accepted
	if !closed(first, 2*time.Second) {
		t.Error("the idle connection was not closed for the newcomer")
	}
	if closed(third, 100*time.Millisecond) {
		t.Error("the newcomer was closed")
	}
}

// Through a real gRPC server: a connection with a call in flight (a health
// Watch stream) is kept; an idle one and a half-sent preface make room for
// a new client's call.
func TestGRPC(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, 3)
	gs := grpc.NewServer(grpc.StatsHandler(l.StatsHandler()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(l)
	defer gs.Stop()
	addr := raw.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := func() healthpb.HealthClient {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return healthpb.NewHealthClient(cc)
	}
	watch, err := client().Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	idle := dial(t, addr)
	waitOpen(t, l, 2)
	half := dial(t, addr)
	_, _ = half.Write([]byte("PRI * HTTP/2.0\r\n"))
	waitOpen(t, l, 3)

	for i := range 2 {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := client().Check(cctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("client %d at the limit: %v", i, err)
		}
		ccancel()
	}
	if !closed(idle, time.Second) || !closed(half, time.Second) {
		t.Error("the idle and the half-preface connection were not closed to make room")
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := watch.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("the watching call was cut: %v %v", r, err)
	}
	if l.Evicted() != 2 {
		t.Errorf("evicted %d, want 2", l.Evicted())
	}
}

// Unauthenticated connections from one address past the per-address
// allowance close the oldest idle unauthenticated one; an authenticated
// connection is never counted, and the total allowance bounds all
// addresses together.
func TestUnauthenticatedAllowance(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, 100)
	l.SetUnauthenticated(2, 0)
	defer l.Close()
	serve(t, l)
	addr := raw.Addr().String()
	c1, c2 := dial(t, addr), dial(t, addr)
	echo(t, c1, "x")
	echo(t, c2, "x")
	authed := dial(t, addr)
	echo(t, authed, "A") // the third from 127.0.0.1: c1 made room
	if !closed(c1, 2*time.Second) || closed(c2, 100*time.Millisecond) {
		t.Fatal("the third unauthenticated connection from one address did not close the oldest (c1) alone")
	}
	c4 := dial(t, addr)
	echo(t, c4, "x") // unauthenticated now: c2, c4 (authed does not count)
	if closed(c2, 100*time.Millisecond) || closed(authed, 100*time.Millisecond) {
		t.Fatal("a connection was closed within the allowance")
	}
	c5 := dial(t, addr)
	echo(t, c5, "x")
	if !closed(c2, 2*time.Second) || closed(authed, 100*time.Millisecond) {
		t.Fatal("past the allowance the oldest unauthenticated connection (c2) is closed, the authenticated one kept")
	}
	if got := l.Evicted(); got != 2 {
		t.Fatalf("evicted %d, want 2", got)
	}

	// The total allowance, across addresses (here one, with no per-address bound).
	raw2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2 := New(raw2, 100)
	l2.SetUnauthenticated(0, 1)
	defer l2.Close()
	serve(t, l2)
	d1 := dial(t, raw2.Addr().String())
	echo(t, d1, "x")
	d2 := dial(t, raw2.Addr().String())
	echo(t, d2, "x")
	if !closed(d1, 2*time.Second) || l2.Open() != 1 {
		t.Fatalf("past the total allowance of 1 the older connection stays open (%d open)", l2.Open())
	}
}

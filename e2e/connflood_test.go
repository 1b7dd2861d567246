package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// openFDs counts the daemon process's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestConnectionFlood: far more idle TCP connections than
// --max-connections on both listeners, half-sent gRPC prefaces and HTTP
// headers, and gRPC connections that finished their preface but never
// call: the daemon holds at most its limit per listener, a real client
// (verifyctl key, a gRPC call, /v1/info, the health check) still gets
// through within 5 s, and every idle or half-open connection is closed
// after the handshake or idle timeout.
func TestConnectionFlood(t *testing.T) {
	t.Parallel()
	const limit = 64
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr,
		"--max-connections", strconv.Itoa(limit), "--handshake-timeout", "2s", "--idle-timeout", "4s"}})
	pid := d.cmd.Process.Pid
	// Let the start settle (adapter processes, the store) before the count.
	if code, body := httpDo(t, "GET", httpAddr, "", "/v1/info", "", nil); code != http.StatusOK {
		t.Fatalf("/v1/info before the flood: %d %s", code, body)
	}
	base := openFDs(t, pid)

	var (
		mu    sync.Mutex
		flood []net.Conn
	)
	open := func(addr string, n int, send []byte) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					return // a refused dial is fine: the point is what the daemon holds
				}
				if send != nil {
					_, _ = c.Write(send)
				}
				mu.Lock()
				flood = append(flood, c)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	t.Cleanup(func() {
		for _, c := range flood {
			c.Close()
		}
	})
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	settings := []byte{0, 0, 0, 4, 0, 0, 0, 0, 0} // an empty SETTINGS frame
	start := time.Now()
	open(d.addr, 300, nil)                                                 // idle TCP
	open(d.addr, 60, preface[:10])                                         // half a preface
	open(d.addr, 60, append(append([]byte{}, preface...), settings...))    // a preface, then nothing
	open(httpAddr, 300, nil)                                               // idle TCP
	open(httpAddr, 60, []byte("GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1")) // half the headers
	t.Logf("%d flood connections open after %v", len(flood), time.Since(start))

	if fds := openFDs(t, pid); fds > base+2*limit+8 {
		t.Errorf("the daemon holds %d descriptors during the flood, %d before: more than its %d connections per listener", fds, base, limit)
	}

	// A real client gets through, each within 5 s.
	within := func(name string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		began := time.Now()
		if err := f(ctx); err != nil {
			t.Errorf("%s during the flood: %v (after %v)", name, err, time.Since(began))
		}
	}
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	within("gRPC health", func(ctx context.Context) error {
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	})
	within("gRPC GetInfo", func(ctx context.Context) error {
		_, err := verifierv1.NewVerifierServiceClient(cc).GetInfo(ctx, &verifierv1.GetInfoRequest{})
		return err
	})
	within("verifyctl key", func(context.Context) error {
		began := time.Now()
		out, code := d.ctl(t, "key")
		if code != 0 || time.Since(began) > 5*time.Second {
			t.Errorf("verifyctl key: exit %d after %v: %s", code, time.Since(began), out)
		}
		return nil
	})
	within("HTTP /v1/info", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+httpAddr+"/v1/info", nil)
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("/v1/info: %d", res.StatusCode)
		}
		return nil
	})
	within("HTTP /health", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+httpAddr+"/health", nil)
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		return nil
	})

	// The listeners' metrics say what happened: every flood connection
	// beyond the limit made room by closing an idle one; none was shed.
	metricsText := func() map[string]float64 {
		code, text := httpDo(t, "GET", httpAddr, "", "/metrics", "", nil)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		m := map[string]float64{}
		for line := range strings.Lines(text) {
			if strings.HasPrefix(line, "verifierd_connections_") {
				name, v, _ := strings.Cut(strings.TrimSpace(line), " ")
				m[name], _ = strconv.ParseFloat(v, 64)
			}
		}
		return m
	}
	m := metricsText()
	for l, flooded := range map[string]int{"grpc": 420, "http": 360} {
		open, evicted, shed := m[`verifierd_connections_open{listener="`+l+`"}`], m[`verifierd_connections_evicted_total{listener="`+l+`"}`], m[`verifierd_connections_shed_total{listener="`+l+`"}`]
		if open > limit || evicted < float64(flooded-limit) || shed != 0 {
			t.Errorf("%s listener: open %v evicted %v shed %v, want open <= %d, evicted >= %d, shed 0 (%v)", l, open, evicted, shed, limit, flooded-limit, m)
		}
	}

	// Every flood connection is closed by the daemon: the handshake
	// timeout (2 s) ends the idle and half-sent ones, the idle timeout (4 s)
	// the ones that finished the preface (gRPC's goodbye then waits up to 5 s
	// for a ping answer these never send); some were closed earlier to make
	// room.
	deadline := start.Add(4*time.Second + 5*time.Second + 5*time.Second)
	var stillOpen atomic.Int64
	var wg sync.WaitGroup
	for _, c := range flood {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			buf := make([]byte, 512)
			for {
				_, err := c.Read(buf)
				if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
					stillOpen.Add(1)
					return
				}
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if n := stillOpen.Load(); n > 0 {
		t.Errorf("%d of %d flood connections still open %v after the flood began (handshake timeout 2s, idle timeout 4s)", n, len(flood), time.Since(start))
	}
	if fds := openFDs(t, pid); fds > base+8 {
		t.Errorf("the daemon holds %d descriptors after the flood, %d before", fds, base)
	}
	if _, err := verifierv1.NewVerifierServiceClient(cc).GetInfo(context.Background(), &verifierv1.GetInfoRequest{}); err != nil {
		t.Errorf("GetInfo after the flood: %v", err)
	}
}

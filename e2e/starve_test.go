package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// starveToken is the API token of the starvation tests' daemons.
const starveToken = "starve-e2e-token"

// startTokenDaemon starts a daemon whose API (gRPC and HTTP, on httpAddr)
// requires starveToken.
func startTokenDaemon(t *testing.T, httpAddr string, args ...string) *daemon {
	t.Helper()
	return startDaemon(t, daemonOpts{
		args:   append([]string{"--http-listen", httpAddr}, args...),
		config: "api:\n  bearer_token_env: VERIFIERD_STARVE_TOKEN\n",
		env:    []string{"VERIFIERD_STARVE_TOKEN=" + starveToken},
	})
}

// bytesCodec sends a message's bytes as they are: an attacker's message.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (bytesCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (bytesCodec) Name() string { return "proto" }

// honestCalls makes the calls an honest, authenticated client makes during
// an attack, over gRPC and HTTP, each with a generous deadline: every one
// must succeed. Their latencies go to the test log (the brief's target is
// under 2 s; a busy machine must not fail the test on it).
func honestCalls(t *testing.T, d *daemon, httpAddr string) {
	t.Helper()
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := verifierv1.NewVerifierServiceClient(cc)
	rec, err := structpb.NewStruct(map[string]any{"id": "1", "patient_id": "p1"})
	if err != nil {
		t.Fatal(err)
	}
	timed := func(name string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+starveToken)
		began := time.Now()
		err := f(ctx)
		t.Logf("honest %s during the attack: %v (err %v)", name, time.Since(began).Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("honest %s during the attack: %v", name, err)
		}
	}
	timed("gRPC GetInfo", func(ctx context.Context) error {
		_, err := client.GetInfo(ctx, &verifierv1.GetInfoRequest{})
		return err
	})
	timed("gRPC Judge", func(ctx context.Context) error {
		res, err := client.Judge(ctx, &verifierv1.JudgeRequest{Effects: hostileEffects,
			Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true, Records: []*structpb.Struct{rec}}})
		if err == nil && res.GetOutcome() != verifierv1.Outcome_VERIFIED {
			return fmt.Errorf("outcome %v, want VERIFIED", res.GetOutcome())
		}
		return err
	})
	body := fmt.Sprintf(`{"effects": %q, "before": {"reachable": true}, "after": {"reachable": true, "records": [{"id": "1", "patient_id": "p1"}]}}`, hostileEffects)
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/v1/info", "", `"keyId"`},
		{"POST", "/v1/judge", body, `"VERIFIED"`},
	} {
		timed("HTTP "+c.method+" "+c.path, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, c.method, "http://"+httpAddr+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+starveToken)
			req.Header.Set("Content-Type", "application/json")
			res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK || !strings.Contains(string(raw), c.want) {
				return fmt.Errorf("%d %.300s, want 200 with %s", res.StatusCode, raw, c.want)
			}
			return nil
		})
	}
}

// checkPeak fails the test when the daemon's peak resident memory
// (VmHWM, over its whole life) passed limitMiB.
func checkPeak(t *testing.T, d *daemon, limitMiB int) {
	t.Helper()
	peak := procKB(d.cmd.Process.Pid, "VmHWM") >> 10
	t.Logf("daemon peak resident memory (VmHWM): %d MiB", peak)
	if peak == 0 || peak > limitMiB {
		t.Errorf("daemon peak resident memory %d MiB, want (0, %d] MiB", peak, limitMiB)
	}
}

// TestHTTPStarvationWithoutToken: 16 connections without the token send
// headers declaring 16 MiB bodies and trickle bytes, reconnecting whenever
// the daemon closes them. The daemon answers each 401 on its headers and
// closes it, holding none of its request budget: honest authenticated
// HTTP and gRPC calls are served meanwhile, and the daemon stays under
// 512 MiB.
func TestHTTPStarvationWithoutToken(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startTokenDaemon(t, httpAddr)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var refused, connects, sends atomic.Int64
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				connects.Add(1)
				if trickleUnauthenticated(ctx, httpAddr, &sends) {
					refused.Add(1)
				}
			}
		})
	}
	// Honest calls once every attacker has sent its headers, and again
	// once the attack has gone on for 800 sends (headers or trickled
	// bytes: some 16 s of trickling by one, 0.3 s by all 16).
	waitFor(t, 30*time.Second, "16 attackers' headers", func() bool { return sends.Load() >= 16 })
	honestCalls(t, d, httpAddr)
	waitFor(t, 60*time.Second, "800 attacker sends", func() bool { return sends.Load() >= 800 })
	honestCalls(t, d, httpAddr)
	stop()
	wg.Wait()
	t.Logf("attack: %d connections, %d answered 401", connects.Load(), refused.Load())
	if refused.Load() == 0 {
		t.Error("no attacker connection was answered 401 on its headers")
	}
	checkPeak(t, d, 512)
}

// trickleUnauthenticated is one attacker connection: headers declaring a
// 16 MiB body without the token, then a byte every 20 ms until the daemon
// answers or closes, or ctx ends, counting each send. It reports whether
// the answer was 401.
func trickleUnauthenticated(ctx context.Context, addr string, sends *atomic.Int64) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		time.Sleep(50 * time.Millisecond) // a refused dial: try again a little later
		return false
	}
	defer c.Close()
	stopClose := context.AfterFunc(ctx, func() { c.Close() })
	defer stopClose()
	if _, err := fmt.Fprintf(c, "POST /v1/judge HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, 16<<20); err != nil {
		return false
	}
	sends.Add(1)
	answered := make(chan bool, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		answered <- err == nil && res.StatusCode == http.StatusUnauthorized
	}()
	for {
		select {
		case ok := <-answered:
			return ok
		case <-time.After(20 * time.Millisecond):
			if _, err := c.Write([]byte(" ")); err != nil {
				return <-answered
			}
			sends.Add(1)
		}
	}
}

// TestGRPCStarvationWithoutToken: one connection without the token keeps
// 24 Judge calls of 16 MiB messages going. The daemon refuses each on its
// headers, before a byte of its message is read (Unauthenticated): honest
// authenticated calls are served meanwhile, and the daemon stays under
// 512 MiB.
func TestGRPCStarvationWithoutToken(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startTokenDaemon(t, httpAddr)
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	msg := make([]byte, 16<<20-64)
	for i := range msg {
		msg[i] = 'x'
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var started, calls, unauthenticated atomic.Int64
	var mu sync.Mutex
	others := map[codes.Code]int{}
	for range 24 {
		wg.Go(func() {
			for ctx.Err() == nil {
				started.Add(1)
				code := sendUnauthenticated(ctx, cc, msg)
				calls.Add(1)
				switch code {
				case codes.Unauthenticated:
					unauthenticated.Add(1)
				case codes.Canceled:
				default:
					mu.Lock()
					others[code]++
					mu.Unlock()
				}
			}
		})
	}
	// Honest calls once all 24 attack calls have begun, and again once 48
	// have ended.
	waitFor(t, 60*time.Second, "24 attack calls begun", func() bool { return started.Load() >= 24 })
	honestCalls(t, d, httpAddr)
	waitFor(t, 120*time.Second, "48 attack calls ended", func() bool { return calls.Load() >= 48 })
	honestCalls(t, d, httpAddr)
	stop()
	wg.Wait()
	t.Logf("attack: %d calls, %d Unauthenticated, others %v", calls.Load(), unauthenticated.Load(), others)
	if unauthenticated.Load() == 0 || len(others) > 0 {
		t.Errorf("attack calls: %d Unauthenticated, others %v; want every one Unauthenticated", unauthenticated.Load(), others)
	}
	checkPeak(t, d, 512)
}

// sendUnauthenticated sends one Judge call of msg without the token and
// returns its code.
func sendUnauthenticated(ctx context.Context, cc *grpc.ClientConn, msg []byte) codes.Code {
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, verifierv1.VerifierService_Judge_FullMethodName, grpc.ForceCodec(bytesCodec{}))
	if err != nil {
		return status.Code(err)
	}
	_ = s.SendMsg(&msg)
	_ = s.CloseSend()
	var out []byte
	return status.Code(s.RecvMsg(&out))
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlowAuthenticatedBodyCut: an authenticated body that arrives slower
// than --min-body-rate after its grace is cut with 408 naming the flag,
// and an honest call is served meanwhile.
func TestSlowAuthenticatedBodyCut(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startTokenDaemon(t, httpAddr, "--min-body-rate", "1024")
	c, err := net.DialTimeout("tcp", httpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	fmt.Fprintf(c, "POST /v1/judge HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", httpAddr, starveToken, 1<<20)
	answered := make(chan *http.Response, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("reading the answer to the slow body: %v", err)
		}
		answered <- res
	}()
	honestCalls(t, d, httpAddr)
	var res *http.Response
	for got := false; !got; {
		select {
		case res = <-answered:
			got = true
		case <-time.After(100 * time.Millisecond):
			_, _ = c.Write([]byte(" ")) // 10 bytes a second, far below 1024
		}
	}
	if res == nil {
		t.Fatal("no answer to the slow body")
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(raw), "--min-body-rate") || !strings.Contains(string(raw), "body_too_slow") {
		t.Fatalf("the slow body: %d %s, want 408 body_too_slow naming --min-body-rate", res.StatusCode, raw)
	}
}

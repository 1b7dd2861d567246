package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// Soak parameters: 50 clients for 60 s (VERIFIERD_SOAK_DURATION overrides
// the duration, for a quick try).
const (
	soakClients  = 50
	soakPatients = 5 // clients share patients, so a few adapter processes serve them all
	soakRSSSlack = 64 << 10
	// soakMaxConns is the daemon's --max-connections; the HTTP flood opens
	// more than that.
	soakMaxConns = 128
)

// TestSoak runs good and hostile traffic through the real daemon binary and
// the sql plugin on a SQLite file. Good traffic: each of 50 clients loops
// Begin, one INSERT (the action), Verify, and must get VERIFIED every time
// with no error. Hostile traffic runs alongside: huge, deep, invalid and
// unknown-id requests, each of which must be refused with its exact code,
// and, on the HTTP listener, what a web page could send (a rebinding Host,
// a form-encoded or cross-site POST) and floods of idle and half-sent
// connections past --max-connections, during which /v1/info must still
// answer.
// Afterwards the daemon's resident memory, after a forced GC (SIGUSR1),
// must be within 64 MiB of where it started.
//
// It takes a minute and loads the machine, so it runs only when asked:
// VERIFIERD_SOAK=1 go test ./e2e -run Soak -v -timeout 10m (make soak).
func TestSoak(t *testing.T) {
	if testing.Short() || os.Getenv("VERIFIERD_SOAK") != "1" {
		t.Skip("the soak test runs only with VERIFIERD_SOAK=1 (make soak)")
	}
	duration := 60 * time.Second
	if s := os.Getenv("VERIFIERD_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("VERIFIERD_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "soak.db")
	db := openSoakDB(t, dbPath)
	// The good traffic names a registered deployment, as production does;
	// the hostile stream sends inline deployments too (the development
	// switch is on), so that their size limits are exercised as well.
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{dataDir: filepath.Join(dir, "data"), inline: true, args: []string{"--log-level", "info",
		"--http-listen", httpAddr, "--max-connections", strconv.Itoa(soakMaxConns), "--handshake-timeout", "2s"}})
	pid := d.cmd.Process.Pid
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := verifierv1.NewVerifierServiceClient(conn)
	dep := []byte(fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, note FROM encounters WHERE patient_id = :p ORDER BY id\n  sql_query_params: {p: {param: p}}\n  census: {sql_query: SELECT id FROM encounters}\n", dbPath))
	depName := d.register(t, writeFile(t, dir, "soak-deployment.yaml", string(dep)))

	var seq atomic.Int64
	session := func(ctx context.Context, patient string) error {
		// A note no other session uses: the contract matches this
		// session's row only, however the clients interleave.
		note := fmt.Sprintf("soak-%d", seq.Add(1))
		effects := []byte(fmt.Sprintf(`[{"kind": "record_written", "match": {"patient_id": {"param": "p"}, "note": %q}, "count_new_only": true, "expected_count": 1, "timeout_s": 5}]`, note))
		begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: depName}, Effects: string(effects), Params: verifierv1.StringParams(map[string]string{"p": patient})})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if _, err := db.Exec(`INSERT INTO encounters (patient_id, note) VALUES (?, ?)`, patient, note); err != nil {
			return fmt.Errorf("the action (insert): %w", err)
		}
		res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		if o := res.GetOutcome(); o != verifierv1.Outcome_VERIFIED {
			return fmt.Errorf("outcome %v: %v", o, res.GetEffects()[0].GetReasons())
		}
		// Rows are never deleted: another client's session sharing the
		// patient would rightly see a deletion as collateral loss.
		return nil
	}

	// Warm up: start every patient's adapter, then measure the start.
	ctx := context.Background()
	for p := range soakPatients {
		if err := session(ctx, fmt.Sprint("patient-", p)); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
	}
	rssStart := settledRSS(t, d, pid)
	anonStart := procKB(pid, "RssAnon")

	var (
		mu      sync.Mutex
		lat     []time.Duration
		goodErr []string
		hostile = map[string]int{}
		wrong   []string
	)
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for c := range soakClients {
		wg.Go(func() {
			patient := fmt.Sprint("patient-", c%soakPatients)
			for time.Now().Before(stop) {
				t0 := time.Now()
				err := session(ctx, patient)
				el := time.Since(t0)
				mu.Lock()
				if err != nil {
					goodErr = append(goodErr, err.Error())
				} else {
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		})
	}
	cases := append(hostileRequests(client, conn, dep), hostileHTTP(httpAddr)...)
	for w := range 2 {
		wg.Go(func() {
			for i := w; time.Now().Before(stop); i++ {
				hc := cases[i%len(cases)]
				err := hc.call(ctx)
				got := status.Code(err)
				mu.Lock()
				hostile[hc.name]++
				if got != hc.code || (hc.want != "" && !strings.Contains(status.Convert(err).Message(), hc.want)) {
					wrong = append(wrong, fmt.Sprintf("%s: %s %q, want %s naming %q", hc.name, got, clipString(status.Convert(err).Message()), hc.code, hc.want))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rssEnd := settledRSS(t, d, pid)
	anonEnd := procKB(pid, "RssAnon")

	slices.Sort(lat)
	total := 0
	for _, n := range hostile {
		total += n
	}
	t.Logf("soak: %d clients for %s: %d sessions (%.1f sessions/s), Begin+Verify p50 %s p99 %s; %d hostile requests %v",
		soakClients, duration, len(lat), float64(len(lat))/duration.Seconds(),
		percentile(lat, 0.50).Round(time.Millisecond), percentile(lat, 0.99).Round(time.Millisecond), total, hostile)
	t.Logf("soak: daemon after a forced GC: VmRSS %d KiB at the start, %d KiB at the end (%+d KiB); RssAnon %d → %d KiB (%+d KiB); RssFile at the end %d KiB; peak VmHWM %d KiB",
		rssStart, rssEnd, rssEnd-rssStart, anonStart, anonEnd, anonEnd-anonStart, procKB(pid, "RssFile"), procKB(pid, "VmHWM"))
	if len(goodErr) > 0 {
		t.Errorf("%d errors on the good traffic, first: %s", len(goodErr), goodErr[0])
	}
	if len(wrong) > 0 {
		t.Errorf("%d hostile requests answered wrongly, first: %s", len(wrong), wrong[0])
	}
	if len(lat) == 0 {
		t.Error("no good session completed")
	}
	// What the daemon holds is its anonymous memory (heap, stacks). VmRSS
	// also counts the store file's pages that bbolt maps and has touched:
	// page cache that grows with the sessions kept (until --retain), which
	// the kernel reclaims under pressure. Both are reported; the anonymous
	// part is held to the bound.
	if anonEnd-anonStart > soakRSSSlack {
		t.Errorf("daemon anonymous memory (RssAnon) grew by %d KiB after a forced GC, over the %d KiB allowed", anonEnd-anonStart, soakRSSSlack)
	}
}

func openSoakDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one writer; the adapter's readers do not wait for it (WAL)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, note TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db
}

type hostileCase struct {
	name string
	call func(context.Context) error
	code codes.Code
	want string
}

// hostileRequests are the requests a daemon must refuse cheaply, each with
// its code and the words its refusal must contain.
func hostileRequests(c verifierv1.VerifierServiceClient, conn *grpc.ClientConn, dep []byte) []hostileCase {
	yaml := &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: string(dep)}
	one := `{"kind": "record_written", "match": {"patient_id": "x"}}`
	huge := "[" + strings.Repeat(one+",", 14<<20/len(one)) + one + "]" // 14 MB effects list
	over := "[" + strings.Repeat(one+",", 1000) + one + "]"            // 1,001 effects
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	bigKind := &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: " + strings.Repeat("k", 10<<20) + "}\n"}
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("ses_\xff\xfe\xfd"))
	begin := func(req *verifierv1.BeginRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := c.Begin(ctx, req); return err }
	}
	return []hostileCase{
		{"huge effects", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: huge}), codes.InvalidArgument, "over the limit of 1048576 bytes"},
		{"oversized message", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: strings.Repeat("\x00", 20<<20)}), codes.ResourceExhausted, ""},
		{"1001 effects", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: over}), codes.InvalidArgument, "over the limit of 1000 effects"},
		{"deep effects", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: deep}), codes.InvalidArgument, "limit of 32 levels"},
		{"1000-deep record", func(ctx context.Context) error {
			_, err := c.Judge(ctx, &verifierv1.JudgeRequest{Effects: "[" + one + "]", Before: &verifierv1.Read{Reachable: true},
				After: &verifierv1.Read{Reachable: true, Records: []*structpb.Struct{deepStruct(1000)}}})
			return err
		}, codes.InvalidArgument, "more than 64 levels"},
		{"1M-deep YAML effects", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: "- " + strings.Repeat("[", 1_000_000)}), codes.InvalidArgument, "limit of 32 levels"},
		{"alias", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: "- &a {kind: record_written, match: {patient_id: x}}\n- *a\n"}), codes.InvalidArgument, "aliases"},
		{"10 MB kind", begin(&verifierv1.BeginRequest{Deployment: bigKind, Effects: over}), codes.InvalidArgument, "over the limit of 1048576 bytes"},
		{"10 MB value", begin(&verifierv1.BeginRequest{Deployment: yaml, Effects: "[" + one + "]", Params: verifierv1.StringParams(map[string]string{"p": strings.Repeat("v", 10<<20)})}), codes.InvalidArgument, "over the limit of 65536 bytes"},
		{"invalid UTF-8", func(ctx context.Context) error {
			var out []byte
			return conn.Invoke(ctx, "/verifierd.verifier.v1.VerifierService/Verify", badUTF8, &out, grpc.ForceCodec(soakRawCodec{}))
		}, codes.InvalidArgument, "not valid UTF-8"},
		{"unknown id", func(ctx context.Context) error {
			_, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: "ses_" + randomHex(48)})
			return err
		}, codes.NotFound, "no session"},
		{"1 MB id", func(ctx context.Context) error {
			_, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: randomHex(1 << 19)})
			return err
		}, codes.InvalidArgument, "over the limit of 128 bytes"},
	}
}

// hostileHTTP are what a web page (or a flood) can send the HTTP listener.
// Each call returns nil when the daemon answers as it must (the case's code
// is OK) and an error saying what it answered otherwise.
//
// A flood makes room by closing the listener's oldest connections that
// serve nobody, a connection whose request is still being sent included
// (docs/operations.md), so a browser's request sent during one can be
// reset, as the flood's author wants. The flood therefore runs alone
// among the HTTP cases (the lock); the gRPC traffic goes on through it.
func hostileHTTP(addr string) []hostileCase {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var alone sync.RWMutex
	send := func(method, path, body string, header map[string]string, host string, want int) func(context.Context) error {
		return func(ctx context.Context) error {
			alone.RLock()
			defer alone.RUnlock()
			req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
			if err != nil {
				return err
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			if host != "" {
				req.Host = host
			}
			res, err := client.Do(req)
			if err != nil {
				return status.Errorf(codes.Unknown, "%s %s: %v", method, path, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != want {
				return status.Errorf(codes.Unknown, "%s %s answered %d, want %d", method, path, res.StatusCode, want)
			}
			return nil
		}
	}
	session := `{"deploymentName": "x", "effects": "[]"}`
	flood := func(ctx context.Context) error {
		alone.Lock()
		defer alone.Unlock()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := range soakMaxConns + soakMaxConns/2 {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				continue // a refused dial is fine: what matters is what the daemon holds
			}
			if i%4 == 0 {
				_, _ = c.Write([]byte("GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1")) // half the headers
			}
			conns = append(conns, c)
		}
		// /v1/info is answered during the flood (sent without the lock,
		// which the flood holds).
		return infoDuring(ctx, client, addr)
	}
	return []hostileCase{
		{"rebinding Host", send("GET", "/console/", "", nil, "rebind.example:80", http.StatusMisdirectedRequest), codes.OK, ""},
		{"form-encoded POST", send("POST", "/v1/sessions", "a=b", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", http.StatusUnsupportedMediaType), codes.OK, ""},
		{"text/plain POST", send("POST", "/v1/sessions", session, map[string]string{"Content-Type": "text/plain"}, "", http.StatusUnsupportedMediaType), codes.OK, ""},
		{"cross-origin POST", send("POST", "/v1/sessions", session, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, "", http.StatusForbidden), codes.OK, ""},
		{"cross-site POST", send("POST", "/v1/sessions", session, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, "", http.StatusForbidden), codes.OK, ""},
		{"connection flood", flood, codes.OK, ""},
	}
}

// infoDuring asks the listener at addr for /v1/info, which must answer 200.
func infoDuring(ctx context.Context, client *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/info", nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return status.Errorf(codes.Unknown, "GET /v1/info during the flood: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return status.Errorf(codes.Unknown, "GET /v1/info during the flood answered %d, want 200", res.StatusCode)
	}
	return nil
}

// soakRawCodec sends hand-made wire bytes a proto client would not marshal.
type soakRawCodec struct{}

func (soakRawCodec) Name() string                  { return "proto" }
func (soakRawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (soakRawCodec) Unmarshal([]byte, any) error   { return nil }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func clipString(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// procKB reads one "Field: N kB" line of /proc/PID/status.
func procKB(pid int, field string) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}

// settledRSS asks the daemon for a forced GC (SIGUSR1), waits for its log
// line, and reads its VmRSS in KiB.
func settledRSS(t *testing.T, d *daemon, pid int) int {
	t.Helper()
	const line = "freed memory on SIGUSR1"
	before := strings.Count(d.logs(), line)
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(d.logs(), line) == before {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not log %q after SIGUSR1:\n%s", line, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return procKB(pid, "VmRSS")
}

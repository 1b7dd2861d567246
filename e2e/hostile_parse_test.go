package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// hostileEffects is a valid one-contract step for the Judge calls below.
const hostileEffects = `[{"kind": "record_written", "match": {"patient_id": "p1"}}]`

// deepRecord is a record whose field x nests n arrays.
func deepRecord(n int) []byte {
	return []byte(`{"id": "1", "patient_id": "p1", "x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

// deepStruct is a record {"id": "1", "x": [[...]]} nested n levels, as
// the Judge RPC carries it.
func deepStruct(n int) *structpb.Struct {
	v := structpb.NewListValue(&structpb.ListValue{})
	for range n - 1 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{"id": structpb.NewStringValue("1"), "x": v}}
}

// structRecords parses each JSON object into the google.protobuf.Struct
// the Judge RPC carries.
func structRecords(t testing.TB, records [][]byte) []*structpb.Struct {
	t.Helper()
	out := make([]*structpb.Struct, len(records))
	for i, r := range records {
		out[i] = &structpb.Struct{}
		if err := protojson.Unmarshal(r, out[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return out
}

// httpJudge posts a JudgeRequest as JSON to /v1/judge, each record as the
// JSON object it is, and returns the status and the body.
func httpJudge(t *testing.T, addr string, effects []byte, records [][]byte) (int, string) {
	t.Helper()
	// Written out by hand: encoding/json would refuse to copy a record
	// nested past its own bound and leave the body empty.
	recs := make([]string, len(records))
	for i, r := range records {
		recs[i] = string(r)
	}
	quoted, _ := json.Marshal(string(effects))
	body := fmt.Sprintf(`{"effects": %s, "before": {"reachable": true}, "after": {"reachable": true, "records": [%s]}}`, quoted, strings.Join(recs, ","))
	res, err := http.Post("http://"+addr+"/v1/judge", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST /v1/judge: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// TestDeepNestingThroughDaemon: documents nested 1.5 million levels deep
// (records to the Judge RPC and POST /v1/judge) and effects documents
// nested a million levels (JSON, YAML flow and YAML block) are refused
// with InvalidArgument (HTTP 400) naming the path; the daemon stays up and
// an honest session afterwards is VERIFIED. Before the nesting bound, the
// first call ended the daemon with "fatal error: stack overflow".
func TestDeepNestingThroughDaemon(t *testing.T) {
	c := newClinic(t)
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	client := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	deep := deepRecord(1_500_000)
	_, err := client.Judge(ctx, &verifierv1.JudgeRequest{
		Effects: hostileEffects,
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true, Records: []*structpb.Struct{structRecords(t, [][]byte{[]byte(`{"id": "0"}`)})[0], deepStruct(1000)}},
	})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument ||
		!strings.Contains(st.Message(), "after.records[1].x[0][0]") || !strings.Contains(st.Message(), "more than 64 levels") {
		t.Fatalf("Judge with a 1000-deep record: %v\ndaemon log:\n%s", err, d.logs())
	}

	code, body := httpJudge(t, httpAddr, []byte(hostileEffects), [][]byte{deep})
	if code != http.StatusBadRequest || !strings.Contains(body, "after.records[0].x[0][0]") || !strings.Contains(body, "more than 64 levels") {
		t.Fatalf("POST /v1/judge with a 1.5M-deep record: %d %.600s\ndaemon log:\n%.2000s", code, body, d.logs())
	}

	// Effects documents within the 1 MiB document limit, nested a million
	// levels: JSON, YAML flow (not JSON: it reads as YAML) and YAML block.
	for name, doc := range map[string]string{
		"json":       strings.Repeat("[", 1_000_000),
		"yaml flow":  "- " + strings.Repeat("[", 1_000_000),
		"yaml block": strings.Repeat("- ", 500_000) + "x\n",
	} {
		_, err := client.Judge(ctx, &verifierv1.JudgeRequest{
			Effects: doc,
			Before:  &verifierv1.Read{Reachable: true},
			After:   &verifierv1.Read{Reachable: true},
		})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "effects") ||
			!strings.Contains(st.Message(), "nests deeper than the limit of 32 levels") {
			t.Fatalf("Judge with a deep %s effects document: %v\ndaemon log:\n%.2000s", name, err, d.logs())
		}
	}

	select {
	case <-d.exited:
		t.Fatalf("the daemon exited:\n%.4000s", d.logs())
	default:
	}
	if strings.Contains(d.logs(), "stack overflow") || strings.Contains(d.logs(), "panic") {
		t.Fatalf("the daemon's log has a crash or a panic:\n%.4000s", d.logs())
	}
	b := d.begin(t, c, "p-after-deep", "Follow-up")
	c.save(t, "p-after-deep", "Follow-up", 1)
	if v := d.verify(t, b.SessionID); v.Outcome != "VERIFIED" {
		t.Fatalf("an honest session after the deep requests: %s", v.summary())
	}
}

// TestInflightBudgetThroughDaemon: with --max-inflight-bytes 4 MiB, a
// request bigger than the budget fails at once with ResourceExhausted
// (429 over HTTP); an HTTP body holds what has arrived, not what it
// declares; a gRPC call that finds the budget held by another is refused
// with ResourceExhausted, then passes once the budget is given back; a
// burst of large requests is served or refused, never more, and
// the daemon's resident memory stays bounded.
func TestInflightBudgetThroughDaemon(t *testing.T) {
	const budget = 4 << 20
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr, "--max-inflight-bytes", fmt.Sprint(budget)}})
	client := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// records of about size bytes in all.
	records := func(size int) [][]byte {
		var out [][]byte
		for n, i := 0, 0; n < size; i++ {
			r := fmt.Appendf(nil, `{"id": "%d", "patient_id": "p%d", "note": "%s"}`, i, i%7, strings.Repeat("n", 200))
			out = append(out, r)
			n += len(r)
		}
		return out
	}
	judge := func(recs [][]byte) error {
		_, err := client.Judge(ctx, &verifierv1.JudgeRequest{
			Effects: hostileEffects,
			Before:  &verifierv1.Read{Reachable: true},
			After:   &verifierv1.Read{Reachable: true, Records: structRecords(t, recs)},
		})
		return err
	}

	// Bigger than the whole budget: refused at once, naming the flag.
	start := time.Now()
	if err := judge(records(5 << 20)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "--max-inflight-bytes") {
		t.Fatalf("a 5 MiB Judge under a 4 MiB budget: %v", err)
	} else if time.Since(start) > 10*time.Second {
		t.Errorf("the refusal took %v", time.Since(start))
	}
	if code, body := httpJudge(t, httpAddr, []byte(hostileEffects), records(5<<20)); code != http.StatusTooManyRequests || !strings.Contains(body, "max-inflight-bytes") {
		t.Fatalf("POST /v1/judge of 5 MiB under a 4 MiB budget: %d %.300s", code, body)
	}

	// An HTTP request that declares 3 MiB and has sent one byte holds a
	// chunk of the budget, not 3 MiB: a 2 MiB HTTP Judge, which draws on
	// the budget as its body arrives, is served meanwhile.
	conn, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const held = 3 << 20
	fmt.Fprintf(conn, "POST /v1/judge HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", httpAddr, held)
	if code, body := httpJudge(t, httpAddr, []byte(hostileEffects), records(2<<20)); code != http.StatusOK {
		t.Fatalf("a 2 MiB HTTP Judge while another request has declared 3 MiB and sent one byte: %d %.300s", code, body)
	}
	// Once nearly all of it has arrived the daemon holds it: a gRPC Judge,
	// which holds gRPC's receive bound (here half the budget) while its
	// message is read, waits a second for room, then is refused with
	// ResourceExhausted.
	if _, err := io.WriteString(conn, strings.Repeat(" ", held-2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a gRPC Judge refused while 3 MiB are held", func() bool {
		return status.Code(judge(records(1<<20))) == codes.ResourceExhausted
	})
	// The held request completes (a refusal: the body is no JudgeRequest)
	// and gives its bytes back: the same call passes.
	if _, err := io.WriteString(conn, "}"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
		t.Fatalf("the held request: %v", err)
	} else {
		res.Body.Close()
	}
	waitFor(t, 30*time.Second, "a gRPC Judge served once the budget is free", func() bool { return judge(records(2<<20)) == nil })

	// A burst: 12 concurrent 3 MiB calls. Each is served or refused with
	// ResourceExhausted; resident memory stays bounded meanwhile.
	pid := d.cmd.Process.Pid
	base := settledRSS(t, d, pid)
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		served, exhausted int
		other             []error
		peak              int
	)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if kb := procKB(pid, "VmRSS"); kb > peak {
				peak = kb
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	burstConn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer burstConn.Close()
	burst := verifierv1.NewVerifierServiceClient(burstConn)
	recs := structRecords(t, records(3<<20))
	for range 12 {
		wg.Go(func() {
			_, err := burst.Judge(ctx, &verifierv1.JudgeRequest{
				Effects: hostileEffects,
				Before:  &verifierv1.Read{Reachable: true},
				After:   &verifierv1.Read{Reachable: true, Records: recs},
			})
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				served++
			case codes.ResourceExhausted:
				exhausted++
			default:
				other = append(other, err)
			}
		})
	}
	wg.Wait()
	close(stopWatch)
	<-watched
	t.Logf("burst: %d served, %d refused; RSS %d MiB settled before, %d MiB peak", served, exhausted, base>>10, peak>>10)
	if len(other) > 0 || served == 0 {
		t.Fatalf("burst: %d served, %d exhausted, other errors %v", served, exhausted, other)
	}
	// 12 calls of 3 MiB arrive at once (36 MiB on the wire, held by gRPC
	// before the budget sees them); the budget lets one decode at a time.
	if grew := (peak - base) >> 10; grew > 256 {
		t.Errorf("resident memory grew by %d MiB during the burst (from %d MiB)", grew, base>>10)
	}
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited:\n%.4000s", d.logs())
	default:
	}
}

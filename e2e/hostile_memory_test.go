package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// The memory a hostile request may make the daemon hold, with the default
// limits: the Kubernetes manifests' limit is 1 GiB.
const (
	singleRequestMiB = 256
	eightRequestsMiB = 512
)

// postJSON posts body to the daemon's HTTP listener and returns the status
// and the start of the answer.
func postJSON(t *testing.T, httpAddr, path string, body []byte) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+httpAddr+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, string(raw)
}

// judgeBody is a /v1/judge body whose after read carries records (JSON
// objects written out).
func judgeBody(records string) []byte {
	return fmt.Appendf(nil, `{"effects": %q, "before": {"reachable": true}, "after": {"reachable": true, "records": [%s]}}`, hostileEffects, records)
}

// tinyRecords is n records of about 13 bytes each, comma-separated.
func tinyRecords(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d}`, i)
	}
	return b.String()
}

// TestHostileRequestMemory: each hostile request of the brief, sent alone
// to a fresh daemon with the default limits, is refused with the limit it
// passed, and the daemon's peak resident memory (VmHWM) stays under
// 256 MiB: a 16 MB body nested 8 million levels; a Judge of 1.1 million
// records over HTTP, of 800,000 over gRPC (14 MB); an effects document of 1 MiB of "-\r"
// lines; a 15.8 MB reward descriptor over gRPC. A Judge at the record
// limit is served within the same bound.
func TestHostileRequestMemory(t *testing.T) {
	cases := []struct {
		name string
		send func(t *testing.T, d *daemon, httpAddr string)
	}{
		{"nested 16 MB HTTP judge", func(t *testing.T, _ *daemon, httpAddr string) {
			deep := strings.Repeat("[", 8_000_000) + strings.Repeat("]", 8_000_000)
			code, body := postJSON(t, httpAddr, "/v1/judge", []byte(`{"effects": "[]", "after": {"reachable": true, "records": `+deep+`}}`))
			if code != http.StatusBadRequest || !strings.Contains(body, "levels") {
				t.Fatalf("%d %.300s, want 400 naming the nesting limit", code, body)
			}
		}},
		{"1.1M records HTTP judge", func(t *testing.T, _ *daemon, httpAddr string) {
			code, body := postJSON(t, httpAddr, "/v1/judge", judgeBody(tinyRecords(1_100_000)))
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "--max-judge-records") || !strings.Contains(body, "after.records") {
				t.Fatalf("%d %.300s, want 413 naming after.records and --max-judge-records", code, body)
			}
		}},
		{"800k records Judge RPC", func(t *testing.T, d *daemon, _ string) {
			recs := make([]*structpb.Struct, 800_000) // 14 MB on the wire
			for i := range recs {
				recs[i] = &structpb.Struct{Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(fmt.Sprint(i))}}
			}
			_, err := d.client(t).Judge(context.Background(), &verifierv1.JudgeRequest{Effects: hostileEffects,
				Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true, Records: recs}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "--max-judge-records") {
				t.Fatalf("%v, want InvalidArgument naming --max-judge-records", err)
			}
		}},
		{"1 MiB of -\\r lines as effects", func(t *testing.T, d *daemon, _ string) {
			_, err := d.client(t).Judge(context.Background(), &verifierv1.JudgeRequest{Effects: strings.Repeat("-\r", 512<<10),
				Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "line breaks") {
				t.Fatalf("%v, want InvalidArgument naming the separator limit", err)
			}
		}},
		{"15.8 MB reward descriptor over gRPC", func(t *testing.T, d *daemon, _ string) {
			_, err := verifierv1.NewRewardServiceClient(d.conn(t)).ScoreEpisode(context.Background(), &verifierv1.ScoreEpisodeRequest{
				Contract: "any", DescriptorJson: []byte(`{"x": "` + strings.Repeat("d", 15_800_000) + `"}`)})
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "1048576") {
				t.Fatalf("%v, want ResourceExhausted naming the 1 MiB bound", err)
			}
		}},
		{"HTTP judge at the record limit", func(t *testing.T, _ *daemon, httpAddr string) {
			var b strings.Builder
			for i := range 100_000 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":"%d","patient_id":"p%d","note":"nnnnnnnnnn"}`, i, i)
			}
			code, body := postJSON(t, httpAddr, "/v1/judge", judgeBody(b.String()))
			if code != http.StatusOK || !strings.Contains(body, `"VERIFIED"`) {
				t.Fatalf("/v1/judge of 100,000 records: %d %.300s, want 200 VERIFIED", code, body)
			}
		}},
		{"a Judge at the record limit", func(t *testing.T, d *daemon, _ string) {
			recs := make([]*structpb.Struct, 100_000)
			for i := range recs {
				recs[i] = &structpb.Struct{Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(fmt.Sprint(i)),
					"patient_id": structpb.NewStringValue(fmt.Sprint("p", i)), "note": structpb.NewStringValue(strings.Repeat("n", 10))}}
			}
			res, err := d.client(t).Judge(context.Background(), &verifierv1.JudgeRequest{Effects: hostileEffects,
				Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true, Records: recs}})
			if err != nil {
				t.Fatalf("a Judge of 100,000 records: %v", err)
			}
			if len(res.GetEffects()) != 1 {
				t.Fatalf("a Judge of 100,000 records: %d effects, want 1", len(res.GetEffects()))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			httpAddr := freeAddr(t)
			d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
			c.send(t, d, httpAddr)
			checkPeak(t, d, singleRequestMiB)
		})
	}
}

// TestEightHostileRequestsMemory: eight hostile requests at once (two of
// each kind) keep the daemon's peak resident memory under 512 MiB, each
// refused with its limit.
func TestEightHostileRequestsMemory(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	client := d.client(t)
	deep := []byte(`{"effects": "[]", "after": {"reachable": true, "records": ` + strings.Repeat("[", 8_000_000) + strings.Repeat("]", 8_000_000) + `}}`)
	many := judgeBody(tinyRecords(1_100_000))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, body := postJSON(t, httpAddr, "/v1/judge", deep); code != http.StatusBadRequest && code != http.StatusTooManyRequests {
				t.Errorf("nested: %d %.200s", code, body)
			}
		})
		wg.Go(func() {
			if code, body := postJSON(t, httpAddr, "/v1/judge", many); code != http.StatusRequestEntityTooLarge && code != http.StatusTooManyRequests {
				t.Errorf("1.1M records: %d %.200s", code, body)
			}
		})
		wg.Go(func() {
			_, err := client.Judge(context.Background(), &verifierv1.JudgeRequest{Effects: strings.Repeat("-\r", 512<<10),
				Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true}})
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Errorf("-\\r effects: %v", err)
			}
		})
		wg.Go(func() {
			_, err := verifierv1.NewRewardServiceClient(d.conn(t)).ScoreEpisode(context.Background(), &verifierv1.ScoreEpisodeRequest{
				Contract: "any", DescriptorJson: []byte(`{"x": "` + strings.Repeat("d", 15_800_000) + `"}`)})
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("reward descriptor: %v", err)
			}
		})
	}
	wg.Wait()
	checkPeak(t, d, eightRequestsMiB)
}

// conn is a gRPC connection to the daemon, closed with the test.
func (d *daemon) conn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

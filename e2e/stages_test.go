package e2e

import (
	"crypto/ed25519"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestBeginVerifyStages measures where one Begin+Verify spends its time,
// from the daemon's own trace spans (exported over OTLP to a collector in
// the test): the gRPC API, the plugin round trips (the before and after
// reads and the census), the judge, the store writes and, measured beside
// them, an Ed25519 signature of a receipt-sized payload (signing happens
// inside store.finish_session). It prints the median of each stage over
// the sessions; BENCHMARKS.md holds a run of it. Opt in with
// VERIFIERD_STAGES=1: a measurement, not a check, though it fails when a
// stage is missing from a session.
func TestBeginVerifyStages(t *testing.T) {
	if os.Getenv("VERIFIERD_STAGES") != "1" {
		t.Skip("a measurement: run with VERIFIERD_STAGES=1 (go test ./e2e -run TestBeginVerifyStages -v)")
	}
	const sessions = 60
	col := newOTLPCollector(t)
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: noChangeClaim, env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}})
	effects, err := os.ReadFile(c.effects)
	if err != nil {
		t.Fatal(err)
	}
	api := d.client(t)
	dep := d.register(t, c.deployment)
	var total []time.Duration
	for i := range sessions + 1 {
		patient := fmt.Sprintf("stage-%d", i)
		params := verifierv1.StringParams(map[string]string{"patient_id": patient, "note": "n"})
		t0 := time.Now()
		b, err := api.Begin(t.Context(), &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects), Params: params})
		if err != nil {
			t.Fatal(err)
		}
		beginTook := time.Since(t0)
		c.save(t, patient, "n", 1) // the action, not timed
		t1 := time.Now()
		v, err := api.Verify(t.Context(), &verifierv1.VerifyRequest{SessionId: b.GetSessionId()})
		if err != nil || v.GetOutcome() != verifierv1.Outcome_VERIFIED {
			t.Fatalf("verify: %v %v", v.GetOutcome(), err)
		}
		if i > 0 { // the first starts the adapter
			total = append(total, beginTook+time.Since(t1))
		}
	}
	d.stop() // flushes the exporter
	spans, _ := col.snapshot()
	byName := map[string][]time.Duration{}
	for _, s := range spans {
		if s.service != "verifierd" {
			continue
		}
		took := time.Duration(s.span.GetEndTimeUnixNano() - s.span.GetStartTimeUnixNano())
		byName[s.span.GetName()] = append(byName[s.span.GetName()], took)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "median of %d sessions (Begin + Verify, client side): %v\n", sessions, median(total))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		fmt.Fprintf(&b, "%-45s n=%-4d median %v\n", n, len(byName[n]), median(byName[n]))
	}
	fmt.Fprintf(&b, "%-45s        median %v\n", "ed25519 signature of 2 KiB (beside)", signTime())
	t.Log("\n" + b.String())
	for _, want := range []string{"session.begin", "session.verify", "capture.before", "capture.after", "capture.census", "judge", "store.create_session", "store.finish_session"} {
		if len(byName[want]) < sessions {
			t.Errorf("span %s: %d, want one per session at least (%d)", want, len(byName[want]), sessions)
		}
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// signTime is the median time of signing a receipt-sized payload.
func signTime() time.Duration {
	_, priv, _ := ed25519.GenerateKey(nil)
	payload := make([]byte, 2048)
	var took []time.Duration
	for range 200 {
		t0 := time.Now()
		ed25519.Sign(priv, payload)
		took = append(took, time.Since(t0))
	}
	return median(took)
}

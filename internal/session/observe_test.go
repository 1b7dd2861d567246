package session

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

const effectsIrreversible = `[{"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0}]`

// scrape returns the registry's text exposition.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// Begin and Verify each write one JSON log line with ids, names, kinds,
// outcome and duration, and never a parameter or record value; the
// metrics move with them.
func TestBeginAndVerifyLogOneLineAndCount(t *testing.T) {
	t.Parallel()
	const paramValue, recordValue = "param-value-5150", "record-value-8675"
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "observe-test", tier: 1, table: tab})
	var logs syncBuffer
	m.logger = hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: &logs, Level: hclog.Info})
	m.metrics = metrics.New(prometheus.NewRegistry())

	ctx := context.Background()
	res, err := m.Begin(ctx, BeginRequest{Deployment: []byte("effects: {kind: observe-test, newness: whole_read}\n"), Effects: []byte(effectsIrreversible), Params: map[string]string{"p": paramValue}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": paramValue, "note": recordValue})
	tab.add(sdk.Record{"id": json.Number("2"), "p": paramValue, "note": recordValue})
	v, err := m.Verify(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != judge.ReconciliationRequired || v.Effects[0].ReconciliationTask == nil {
		t.Fatalf("outcome %s, want RECONCILIATION_REQUIRED (a double submit)", v.Outcome)
	}
	if _, err := m.Verify(ctx, res.SessionID); err != nil { // a replay: logged, not counted
		t.Fatal(err)
	}

	out := logs.String()
	for _, secret := range []string{paramValue, recordValue} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds the value %q:\n%s", secret, out)
		}
	}
	var lines []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if l["session"] == res.SessionID {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d log lines for the session, want 3 (Begin, Verify, replayed Verify):\n%s", len(lines), out)
	}
	want := []struct{ msg, outcome string }{{"session begun", "BEGUN"}, {"session verified", "RECONCILIATION_REQUIRED"}, {"session verified", "RECONCILIATION_REQUIRED"}}
	for i, w := range want {
		l := lines[i]
		if l["@message"] != w.msg || l["outcome"] != w.outcome {
			t.Errorf("line %d: %v / %v, want %s / %s", i, l["@message"], l["outcome"], w.msg, w.outcome)
		}
		if _, ok := l["duration_ms"].(float64); !ok {
			t.Errorf("line %d has no duration_ms: %v", i, l)
		}
		if kinds, _ := l["kinds"].([]any); len(kinds) != 1 || kinds[0] != "observe-test" {
			t.Errorf("line %d kinds = %v, want [observe-test]", i, l["kinds"])
		}
		if _, ok := l["deployment"]; !ok {
			t.Errorf("line %d has no deployment field: %v", i, l)
		}
	}
	if lines[2]["replay"] != true || lines[1]["replay"] != false {
		t.Errorf("replay flags %v, %v; want false, true", lines[1]["replay"], lines[2]["replay"])
	}

	text := scrape(t, m.metrics)
	// Every settle poll reads both records: the count is a multiple of 2.
	if !strings.Contains(text, `verifierd_capture_rows_total{kind="observe-test",phase="after"} `) {
		t.Errorf("metrics count no rows read after:\n%s", text)
	}
	for _, want := range []string{
		`verifierd_sessions_begun_total{outcome="BEGUN"} 1`,
		`verifierd_sessions_verified_total{deployment="inline",outcome="RECONCILIATION_REQUIRED"} 1`,
		`verifierd_verdicts_total{deployment="inline",kind="observe-test",result="conflicting",tier="1",verdict="REFUTED"} 1`,
		`verifierd_begin_duration_seconds_count 1`,
		`verifierd_verify_duration_seconds_count 1`,
		`verifierd_reconciliation_tasks_issued_total 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
}

package session

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// deleteServer is a real HTTP server that deletes rows of tab by id; it
// fails every DELETE after the first failAfter successes (0: never).
func deleteServer(t *testing.T, tab *table, failAfter int32) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Method != http.MethodDelete || !strings.HasPrefix(r.URL.Path, "/rows/") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if failAfter > 0 && n > failAfter {
			http.Error(w, "server error", http.StatusInternalServerError)
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/rows/")
		tab.mu.Lock()
		defer tab.mu.Unlock()
		for i, row := range tab.rows {
			if row["id"] == json.Number(id) {
				tab.rows = append(tab.rows[:i], tab.rows[i+1:]...)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		http.Error(w, "no such row", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestCompensatorRemovesDuplicates(t *testing.T) {
	t.Parallel()
	const effects = `[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0}]`
	tests := []struct {
		name       string
		configured bool
		failAfter  int32
		verdict    judge.Decision
		codes      []string
		taskKind   string
		deleted    int // digests of records deleted before a failure
		rowsLeft   int
	}{
		{"deletes down to expected_count and re-verifies", true, 0, judge.Confirmed, []string{judge.ReasonCountExact, ReasonCompensated}, "", 0, 1},
		{"fails half-way", true, 1, judge.Refuted, []string{judge.ReasonCountOver}, judge.TaskCompensationFailed, 1, 2},
		{"off unless configured", false, 0, judge.Refuted, []string{judge.ReasonCountOver}, judge.TaskEffectRefuted, 0, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			srv, _ := deleteServer(t, tab, tt.failAfter)
			kind := "comp-test-" + string(rune('a'+i))
			m := newManager(t, &memAdapter{kind: kind, tier: 1, table: tab})
			dep := "effects: {kind: " + kind + ", newness: whole_read}\n"
			if tt.configured {
				dep = "effects:\n  kind: " + kind + "\n  newness: whole_read\n  compensator: {kind: rest_delete, base_url: '" + srv.URL + "', delete_path: '/rows/{id}'}\n"
			}
			// A compensator is the operator's: only a registered deployment
			// may configure one.
			m.daemon.Deployments = map[string]string{kind: writeDeployment(t, dep)}
			res, err := m.Begin(context.Background(), BeginRequest{DeploymentName: kind, Effects: []byte(effects)})
			if err != nil {
				t.Fatal(err)
			}
			// A triple submit: ids 30, 4 and 100 (the lowest, 4, must stay).
			for _, id := range []string{"30", "4", "100"} {
				tab.add(sdk.Record{"id": json.Number(id), "p": "1"})
			}
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			var codes []string
			for _, r := range e.Reasons {
				codes = append(codes, r.Code)
			}
			if e.Verdict != tt.verdict || strings.Join(codes, ",") != strings.Join(tt.codes, ",") {
				t.Errorf("verdict %s %v, want %s %v", e.Verdict, codes, tt.verdict, tt.codes)
			}
			switch {
			case tt.taskKind == "" && e.ReconciliationTask != nil:
				t.Errorf("unexpected task %+v", e.ReconciliationTask)
			case tt.taskKind != "" && (e.ReconciliationTask == nil || e.ReconciliationTask.Kind != tt.taskKind):
				t.Errorf("task %+v, want kind %s", e.ReconciliationTask, tt.taskKind)
			case tt.taskKind != "" && len(e.ReconciliationTask.Evidence.DeletedDigests) != tt.deleted:
				t.Errorf("deleted digests %v, want %d", e.ReconciliationTask.Evidence.DeletedDigests, tt.deleted)
			}
			tab.mu.Lock()
			left := len(tab.rows)
			kept := tab.rows[0]["id"]
			tab.mu.Unlock()
			if left != tt.rowsLeft {
				t.Errorf("%d rows left, want %d", left, tt.rowsLeft)
			}
			if tt.rowsLeft == 1 && kept != json.Number("4") {
				t.Errorf("kept id %v, want the lowest identity 4", kept)
			}
		})
	}
}

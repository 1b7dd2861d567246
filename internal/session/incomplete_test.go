package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// incompleteAdapter answers its after reads as not whole (sdk.Incomplete
// with code) once code is set, as an HTTP adapter does for a full single
// response or a count that misses the declared total.
type incompleteAdapter struct {
	*memAdapter
	code atomic.Pointer[string]
}

func (a *incompleteAdapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	if c := a.code.Load(); c != nil {
		return sdk.Incomplete(*c, "the response holds 100 records, at least max_records (100)"), nil
	}
	return a.memAdapter.CaptureAfter(ctx, req)
}

// TestIncompleteReadCode: the code of a read that answered but is not
// whole travels from the adapter through the plugin host into the judge:
// the effect is INDETERMINATE with that code, class indeterminate (a doubt
// about the read, not an outage), never CONFIRMED; a plain outage stays
// SOR_UNREACHABLE, class unavailable.
func TestIncompleteReadCode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code, wantCode string
		wantClass      judge.Class
	}{
		{sdk.CodeReadMayBeTruncated, judge.ReasonReadMayBeTruncated, judge.ClassIndeterminate},
		{sdk.CodeReadIncomplete, judge.ReasonReadIncomplete, judge.ClassIndeterminate},
		{"", judge.ReasonSORUnreachable, judge.ClassUnavailable},
	} {
		t.Run(tt.wantCode, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			kind := "incomplete-test-" + strings.ToLower(tt.wantCode)
			a := &incompleteAdapter{memAdapter: &memAdapter{kind: kind, tier: 1, table: tab}}
			m := newManager(t, a)
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: " + kind + ", newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
			if err != nil {
				t.Fatal(err)
			}
			tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
			if tt.code != "" {
				a.code.Store(&tt.code)
			} else {
				tab.mu.Lock()
				tab.unreachable = true
				tab.mu.Unlock()
			}
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			if e.Verdict != judge.Indeterminate || e.Result != tt.wantClass || len(e.Reasons) == 0 || e.Reasons[0].Code != tt.wantCode {
				t.Fatalf("effect %s/%s %+v; want INDETERMINATE/%s/%s", e.Verdict, e.Result, e.Reasons, tt.wantClass, tt.wantCode)
			}
			if tt.code != "" && !strings.Contains(e.Reasons[0].Message, "max_records (100)") {
				t.Errorf("message %q lacks the adapter's reason", e.Reasons[0].Message)
			}
			if v.Outcome != judge.ReconciliationRequired {
				t.Errorf("outcome %s", v.Outcome)
			}
		})
	}
}

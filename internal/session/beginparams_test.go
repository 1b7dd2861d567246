package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// binding is a memAdapter that binds the run parameter "q": it refuses
// "bad" with a path, as an adapter's CheckParams does, and counts the
// checks and the baseline reads.
type binding struct {
	*memAdapter
	checks, befores atomic.Int32
}

func (b *binding) CheckParams(_ context.Context, params map[string]string) error {
	b.checks.Add(1)
	if params["q"] == "bad" {
		return &refusal.Error{Path: "options.q", Message: "\"bad\" does not bind"}
	}
	return nil
}

func (b *binding) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	b.befores.Add(1)
	return b.memAdapter.CaptureBefore(ctx, req)
}

const effectsConst = `[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "timeout_s": 0.2}]`

// TestBeginParamRefusalInTheCapture: Begin asks no CheckParams of its own
// for the candidate it reads; the baseline capture binds the parameters
// first and a refusal is the same INVALID refusal, with the same path and
// message, that CheckParams gave (the path inside the candidate, the
// adapter's message), before anything is read and with nothing kept. A
// candidate that is not read is still asked, and refuses the same way.
func TestBeginParamRefusalInTheCapture(t *testing.T) {
	t.Parallel()
	tab := &table{}
	strong := &binding{memAdapter: &memAdapter{kind: "bind-strong", tier: sdk.TierIndependentSystem, table: tab}}
	weak := &binding{memAdapter: &memAdapter{kind: "bind-weak", tier: sdk.TierIndependentSession, table: tab}}
	m := newManager(t, strong, weak)
	ctx := context.Background()

	one := []byte("effects: {kind: bind-strong, newness: whole_read}\n")
	_, err := m.Begin(ctx, BeginRequest{Deployment: one, Effects: []byte(effectsConst), Params: map[string]string{"q": "bad"}})
	var se *Error
	if !errors.As(err, &se) || se.Kind != Invalid || se.Path != "deployment.effects.options.q" || se.Message != `"bad" does not bind` {
		t.Fatalf("Begin with a refused parameter: %#v; want INVALID at deployment.effects.options.q", err)
	}
	if c, b := strong.checks.Load(), strong.befores.Load(); c != 1 || b != 0 {
		t.Errorf("refused Begin: %d checks, %d baseline reads; want 1 check and no read", c, b)
	}
	st, err := m.store.(*bolt.Store).RemoveOrphans(ctx, time.Now(), 0)
	if err != nil || st.OrphanBaselines != 0 {
		t.Errorf("after the refusal: %d baseline chunks left behind (%v); want none", st.OrphanBaselines, err)
	}

	// Bound parameters: one check (inside the capture) and one read.
	if _, err := m.Begin(ctx, BeginRequest{Deployment: one, Effects: []byte(effectsConst), Params: map[string]string{"q": "ok"}}); err != nil {
		t.Fatal(err)
	}
	if c, b := strong.checks.Load(), strong.befores.Load(); c != 2 || b != 1 {
		t.Errorf("after a Begin that binds: %d checks, %d baseline reads; want 2 and 1", c, b)
	}

	// Two candidates: the first one in the deployment that does not bind
	// is refused, as when each was asked in turn, whether it is the one
	// read (its capture refuses) or not (it is asked).
	for _, tc := range []struct{ dep, path string }{
		{"effects:\n  candidates:\n    - {kind: bind-strong, newness: whole_read}\n    - {kind: bind-weak, newness: whole_read}\n", "deployment.effects.candidates[0].options.q"},
		{"effects:\n  candidates:\n    - {kind: bind-weak, newness: whole_read}\n    - {kind: bind-strong, newness: whole_read}\n", "deployment.effects.candidates[0].options.q"},
	} {
		_, err = m.Begin(ctx, BeginRequest{Deployment: []byte(tc.dep), Effects: []byte(effectsConst), Params: map[string]string{"q": "bad"}})
		if !errors.As(err, &se) || se.Kind != Invalid || se.Path != tc.path || se.Message != `"bad" does not bind` {
			t.Fatalf("Begin with %q: %#v; want INVALID at %s", tc.dep, err, tc.path)
		}
	}
	if b := weak.befores.Load(); b != 0 || weak.checks.Load() != 1 {
		t.Errorf("the weaker candidate was read %d times and checked %d; want never read, checked once (when it came first)", b, weak.checks.Load())
	}
	if b := strong.befores.Load(); b != 1 {
		t.Errorf("the stronger candidate was read %d times; want once (the Begin that bound)", b)
	}
}

// TestVerifyAnswersWhatIsStored: Verify answers its own result without
// decoding the stored JSON again; it must be exactly what GetSession (the
// stored result) answers, receipt included, confirmed or refuted.
func TestVerifyAnswersWhatIsStored(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := signedManager(t, &memAdapter{kind: "stored-answer", tier: 1, table: tab})
	ctx := context.Background()
	dep := []byte("effects: {kind: stored-answer, newness: whole_read}\n")
	for _, rows := range []int{1, 2} { // one new record: CONFIRMED; two: REFUTED with a task
		res, err := m.Begin(ctx, BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			tab.add(sdk.Record{"id": json.Number(fmt.Sprint(100*rows + i)), "p": "1", "amount": json.Number("2.50"), "o": map[string]any{"k": []any{true, nil}}})
		}
		v, err := m.Verify(ctx, res.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.Get(ctx, res.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(v)
		want, _ := json.Marshal(st.Result)
		if string(got) != string(want) || len(v.Receipt) == 0 {
			t.Fatalf("Verify answered\n%s\nthe stored result is\n%s", got, want)
		}
		again, err := m.Verify(ctx, res.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if replay, _ := json.Marshal(again); string(replay) != string(want) {
			t.Fatalf("a second Verify answered\n%s\nwant\n%s", replay, want)
		}
		t.Logf("%d new: %s", rows, v.Outcome)
	}
}

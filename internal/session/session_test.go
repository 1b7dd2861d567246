package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// memAdapter is a test adapter over an in-memory table. It stands in for
// daemon-side rules that no shipped adapter can exercise: custom tiers, a
// hook that tries to promote, a baseline that fails on cue. Adapters against
// real systems of record are tested in adapters/ and e2e/.
type memAdapter struct {
	kind    string
	tier    sdk.Tier
	absence bool
	table   *table
	hook    func(sdk.VerdictRequest) sdk.Demotion
	// afterRead, when set, runs after the n-th after read (from 1): a
	// synchronisation point for a write landing between two reads.
	afterRead func(n int)
	after     atomic.Int32
}

type table struct {
	mu          sync.Mutex
	rows        []sdk.Record
	unreachable bool
}

func (t *table) add(r sdk.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

func (a *memAdapter) Info() sdk.Info {
	return sdk.Info{Kind: a.kind, Tier: a.tier, AbsenceNotProof: a.absence}
}
func (a *memAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (a *memAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "memory"}, nil
}
func (a *memAdapter) read() (sdk.Capture, error) {
	a.table.mu.Lock()
	defer a.table.mu.Unlock()
	if a.table.unreachable {
		return sdk.Unreachable("table offline"), nil
	}
	return sdk.Capture{Reachable: true, Records: sdk.Records(append([]sdk.Record(nil), a.table.rows...)...)}, nil
}
func (a *memAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read()
}
func (a *memAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	c, err := a.read()
	if a.afterRead != nil {
		a.afterRead(int(a.after.Add(1)))
	}
	return c, err
}

// fakeClock is an injected clock: Sleep advances it at once, so a settle
// window is walked through in poll steps without real waiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return nil
}

type hooked struct{ *memAdapter }

func (h hooked) Verdict(_ context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	return h.hook(req), nil
}

// newManager builds a Manager with in-process adapters. Kind names are not
// built-in, so they go through the same host path a customer plugin does.
func newManager(t *testing.T, adapters ...sdk.Adapter) *Manager {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range adapters {
		host.RegisterInProcess(a.Info().Kind, func() sdk.Adapter { return a })
	}
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	// Most tests here are about the lifecycle, not the trust rules: they
	// send inline deployments and their own effects (trust_test.go covers
	// the default refusals).
	return mustNew(t, Options{Host: host, Store: st, Daemon: &config.Daemon{Policy: callerContracts(nil)}, PollInterval: 5 * time.Millisecond, AllowInline: true})
}

// callerContracts returns p (a new policy when nil) with
// require_registered_contracts off, as the operator of a daemon whose
// callers send their own effects sets it.
func callerContracts(p *workflow.Policy) *workflow.Policy {
	if p == nil {
		p = &workflow.Policy{}
	}
	no := false
	p.RequireRegisteredContracts = &no
	return p
}

const effectsRW = `[{"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "timeout_s": 0.2}]`

func TestSelectStrongestTier(t *testing.T) {
	t.Parallel()
	tab := &table{}
	screen := &memAdapter{kind: "screen-test", tier: sdk.TierScreenConsistency, table: tab}
	page := &memAdapter{kind: "page-test", tier: sdk.TierIndependentSession, table: tab}
	page2 := &memAdapter{kind: "page2-test", tier: sdk.TierIndependentSession, table: tab}
	m := newManager(t, screen, page, page2)
	dep := []byte("effects:\n  candidates:\n    - {kind: screen-test, newness: whole_read}\n    - {kind: page-test, newness: whole_read}\n    - {kind: page2-test, newness: whole_read}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	// Tier 2 beats tier 4; between the two tier-2 candidates the first wins.
	if e := res.Effects[0]; e.Tier != 2 || e.Candidate != "page-test" || e.CandidateIndex != 1 {
		t.Errorf("selected %+v, want page-test (index 1) at tier 2", e)
	}
}

func TestHookDemotesNeverPromotes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		write    bool
		hook     sdk.Demotion
		absence  bool
		verdict  judge.Decision
		class    judge.Class
		lastCode string
	}{
		{"confirmed stays", true, sdk.Demotion{}, false, judge.Confirmed, judge.ClassConfirmed, judge.ReasonCountExact},
		{"confirmed demoted", true, sdk.Demotion{Verdict: sdk.VerdictIndeterminate, ReasonCode: "PAGE_CACHED", Message: "served from cache"}, false, judge.Indeterminate, judge.ClassIndeterminate, "PAGE_CACHED"},
		{"refuted cannot be promoted", false, sdk.Demotion{Verdict: sdk.VerdictConfirmed, ReasonCode: "TRUST_ME"}, false, judge.Refuted, judge.ClassRefuted, judge.ReasonCountUnder},
		{"absence is not proof", false, sdk.Demotion{}, true, judge.Refuted, judge.ClassConflicting, judge.ReasonCountUnder},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			kind := fmt.Sprintf("hook-test-%d", i)
			a := hooked{&memAdapter{kind: kind, tier: 1, absence: tt.absence, table: tab,
				hook: func(sdk.VerdictRequest) sdk.Demotion { return tt.hook }}}
			m := newManager(t, a)
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: " + kind + ", newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.write {
				tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
			}
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			last := e.Reasons[len(e.Reasons)-1].Code
			if e.Verdict != tt.verdict || e.Result != tt.class || last != tt.lastCode {
				t.Errorf("got %s/%s/%s, want %s/%s/%s", e.Verdict, e.Result, last, tt.verdict, tt.class, tt.lastCode)
			}
			wantOutcome := judge.StepOutcome([]judge.Class{tt.class})
			if v.Outcome != wantOutcome {
				t.Errorf("outcome %s, want %s", v.Outcome, wantOutcome)
			}
		})
	}
}

func TestBeginRefusedWithoutBaseline(t *testing.T) {
	t.Parallel()
	tab := &table{unreachable: true}
	m := newManager(t, &memAdapter{kind: "down-test", tier: 1, table: tab})
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: down-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	var se *Error
	if !errors.As(err, &se) || se.Kind != Refused || se.Path != "effects[0]" {
		t.Fatalf("err = %v, want a Refused error on effects[0]", err)
	}
	// A field_equals read-back does not need the baseline: it begins. A
	// lone read-back claims no change, so the operator's policy allows it.
	noClaim := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireChangeClaim: &noClaim})
	fe := `[{"kind": "field_equals", "match": {"p": "1"}, "field": "note", "value": "x", "timeout_s": 0}]`
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: down-test, newness: whole_read}\n"), Effects: []byte(fe)})
	if err != nil {
		t.Fatalf("field_equals with an unreadable baseline: %v", err)
	}
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Verdict != judge.Indeterminate || e.Result != judge.ClassUnavailable {
		t.Errorf("verify with the table still down: %s/%s, want INDETERMINATE/unavailable", e.Verdict, e.Result)
	}
}

func TestSettleCatchesLateDuplicate(t *testing.T) {
	t.Parallel()
	tab := &table{}
	// The double submit lands right after the first after read, which
	// confirms and opens the settle window; the injected clock walks the
	// window in poll steps, so the next read must see it, on any machine.
	a := &memAdapter{kind: "late-test", tier: 1, table: tab}
	a.afterRead = func(n int) {
		if n == 1 {
			tab.add(sdk.Record{"id": json.Number("2"), "p": "1"})
		}
	}
	m := newManager(t, a)
	m.clock = &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dep := []byte("effects: {kind: late-test, settle_s: 0.3, newness: whole_read}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Verdict != judge.Refuted || e.Reasons[0].Code != judge.ReasonCountOver {
		t.Errorf("verify = %s %v, want REFUTED COUNT_OVER (the settle window saw the late duplicate)", e.Verdict, e.Reasons)
	}
}

func TestUnknownSessionAndRecordedResult(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "rec-test", tier: 1, table: tab})
	if _, err := m.Verify(context.Background(), "ses_nope"); err == nil {
		t.Fatal("verify of an unknown session succeeded")
	} else if se := (*Error)(nil); !errors.As(err, &se) || se.Kind != NotFound {
		t.Fatalf("err = %v, want NotFound", err)
	}
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: rec-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "1"}) // lands after the verdict
	second, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if first.Effects[0].Verdict != judge.Refuted || second.Effects[0].Verdict != judge.Refuted || !second.VerifiedAt.Equal(first.VerifiedAt) {
		t.Errorf("second verify %s at %s, want the recorded REFUTED at %s", second.Effects[0].Verdict, second.VerifiedAt, first.VerifiedAt)
	}
	st, err := m.Get(t.Context(), res.SessionID)
	if err != nil || st.Result == nil || st.Result.Outcome != judge.HaltedBeforeEffect {
		t.Errorf("get = %+v, %v", st, err)
	}
}

// mustNew is New, failing t on a refusal.
func mustNew(t testing.TB, o Options) *Manager {
	t.Helper()
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

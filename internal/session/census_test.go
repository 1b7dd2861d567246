package session

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// scoped is a test adapter kind whose read is narrowed the way a
// deployment narrows a real one: options.owner (bound from a run parameter
// through option_params) keeps only that owner's rows; without it (a
// census) every row is read. Each configured instance is its own
// scopedAdapter; they share the table and the counters.
type scoped struct {
	table *table
	// censusBefore, censusAfter and after count the reads made.
	censusBefore, censusAfter, after atomic.Int32
	// censusDown makes every census read unreachable.
	censusDown atomic.Bool
	// censusOptions are the options the last census instance was
	// configured with.
	censusOptions atomic.Pointer[map[string]string]
}

type scopedAdapter struct {
	s     *scoped
	kind  string
	owner *string // nil: a census
}

func (a *scopedAdapter) Info() sdk.Info { return sdk.Info{Kind: a.kind, Tier: 1} }
func (a *scopedAdapter) Configure(_ context.Context, req sdk.ConfigureRequest) error {
	var cfg struct {
		Options map[string]string `json:"options"`
	}
	if err := json.Unmarshal(req.Config, &cfg); err != nil {
		return err
	}
	if o, ok := cfg.Options["owner"]; ok {
		a.owner = &o
	} else {
		a.s.censusOptions.Store(&cfg.Options)
	}
	if _, bad := cfg.Options["bad"]; bad {
		return &refusal.Error{Path: "options.bad", Message: "refused by the adapter"}
	}
	return nil
}
func (a *scopedAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	if a.owner == nil && a.s.censusDown.Load() {
		return sdk.TestResult{Message: "census offline"}, nil
	}
	return sdk.TestResult{Reachable: true}, nil
}
func (a *scopedAdapter) read(before bool) (sdk.Capture, error) {
	switch {
	case a.owner != nil:
		if !before {
			a.s.after.Add(1)
		}
	case before:
		a.s.censusBefore.Add(1)
	default:
		a.s.censusAfter.Add(1)
	}
	if a.owner == nil && a.s.censusDown.Load() {
		return sdk.Unreachable("census offline"), nil
	}
	a.s.table.mu.Lock()
	defer a.s.table.mu.Unlock()
	var out []sdk.Record
	for _, r := range a.s.table.rows {
		if a.owner == nil || r["owner"] == *a.owner {
			out = append(out, maps.Clone(r))
		}
	}
	return sdk.Capture{Reachable: true, Records: sdk.Records(out...)}, nil
}
func (a *scopedAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read(true)
}
func (a *scopedAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read(false)
}

func (t *table) set(id int, field string, v any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.rows {
		if r["id"] == json.Number(itoa(id)) {
			r[field] = v
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// censusManager builds a Manager with the scoped kind and two existing
// rows: id 1 of owner a, id 2 of owner b.
func censusManager(t *testing.T, kind string) (*Manager, *scoped) {
	t.Helper()
	s := &scoped{table: &table{}}
	s.table.add(sdk.Record{"id": json.Number("1"), "owner": "a", "note": "first"})
	s.table.add(sdk.Record{"id": json.Number("2"), "owner": "b", "note": "second"})
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess(kind, func() sdk.Adapter { return &scopedAdapter{s: s, kind: kind} })
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	return mustNew(t, Options{Host: host, Store: st, Daemon: &config.Daemon{Policy: callerContracts(nil)}, PollInterval: 5 * time.Millisecond, AllowInline: true}), s
}

const effectsOwner = `[{"kind": "record_written", "match": {"owner": {"param": "owner"}}, "count_new_only": true, "timeout_s": 0.2}]`

func censusDeployment(kind, census string) []byte {
	return []byte("effects:\n  kind: " + kind + "\n  option_params: {owner: {param: owner}}\n" + census)
}

// TestCensusStoredAtBegin: the census is read once at Begin with the
// baseline, through its own instance (every row, not the subject's), and
// stored beside the baseline with only the identity field of each record.
func TestCensusStoredAtBegin(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-begin")
	dep := censusDeployment("census-begin", "  census: {census_scope: declared, options: {}}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.censusBefore.Load(); n != 1 {
		t.Errorf("census read %d times at Begin, want 1", n)
	}
	raw, _, err := m.store.Session(t.Context(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	c := md.Captures[0]
	if c.Records != 1 || c.Census == nil || !c.Census.Reachable || c.Census.Records != 2 || len(c.Census.Fields) != 1 || c.Census.Fields[0] != "id" {
		t.Fatalf("capture %+v census %+v, want a baseline of 1 and a census of 2 ids", c, c.Census)
	}
	var stored []string
	if err := m.store.ReadBaseline(t.Context(), res.SessionID, store.CensusCapture(0), func(rec []byte) error {
		stored = append(stored, string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Each record keeps its identity and the keyed digest of the whole
	// record, no other value.
	digest := m.evidence().digester()
	want := []string{
		`{"id":1,"verifierd:digest":"` + digest(judge.Record{"id": json.Number("1"), "owner": "a", "note": "first"}) + `"}`,
		`{"id":2,"verifierd:digest":"` + digest(judge.Record{"id": json.Number("2"), "owner": "b", "note": "second"}) + `"}`,
	}
	if strings.Join(stored, ",") != strings.Join(want, ",") || !strings.Contains(want[0], judge.KeyedPrefix) {
		t.Errorf("stored census %v, want the identities and keyed digests of both rows %v", stored, want)
	}
}

// TestCensusSeesChangeInPlace: a verdict that would say nothing landed
// (HALTED_BEFORE_EFFECT) is conflicting with UNEXPLAINED_CHANGE when the
// census saw a record of the collection change in place, by its digest;
// also when the redaction policy keys the stored census (identities, or
// everything but one field, digest included). Unchanged, it still halts.
func TestCensusSeesChangeInPlace(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string]string{"clear": "", "keyed": "  evidence_redact_fields: [id]\n", "kept": "  evidence_keep_fields: [owner]\n"} {
		for _, change := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/changed=%v", name, change), func(t *testing.T) {
				t.Parallel()
				kind := fmt.Sprintf("census-inplace-%s-%v", name, change)
				m, s := censusManager(t, kind)
				dep := censusDeployment(kind, extra+"  census: {options: {}, census_scope: declared}\n")
				res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
				if err != nil {
					t.Fatal(err)
				}
				if change {
					s.table.set(2, "note", "overwritten") // b's record edited, nothing of a's saved
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
				want, outcome, result := "COUNT_UNDER", judge.HaltedBeforeEffect, judge.ClassRefuted
				if change {
					want, outcome, result = "COUNT_UNDER,UNEXPLAINED_CHANGE", judge.ReconciliationRequired, judge.ClassConflicting
				}
				if strings.Join(codes, ",") != want || e.Result != result || v.Outcome != outcome {
					t.Errorf("%s/%s %v, outcome %s; want %s %s, outcome %s", e.Verdict, e.Result, codes, v.Outcome, result, want, outcome)
				}
			})
		}
	}
}

// TestCensusReadEveryPoll: every after read of Verify reads the after
// census beside it, and the result records newness census over the
// collection.
func TestCensusReadEveryPoll(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-poll")
	dep := censusDeployment("census-poll", "  settle_s: 0.05\n  census: {census_scope: declared, options: {}}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	s.table.add(sdk.Record{"id": json.Number("3"), "owner": "a", "note": "new"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	after, census := s.after.Load(), s.censusAfter.Load()
	if after < 2 || census != after {
		t.Errorf("%d after reads and %d census reads, want one census read per after read (at least 2 with the settle window)", after, census)
	}
	e := v.Effects[0]
	if e.Verdict != judge.Confirmed || e.Newness != config.NewnessCensus || e.CensusScope != config.CensusScopeDeclared || e.CollateralScope != config.ScopeCollection {
		t.Errorf("effect %s newness %q census scope %q scope %q, want CONFIRMED census declared collection (an honest new record)", e.Verdict, e.Newness, e.CensusScope, e.CollateralScope)
	}
}

// TestCensusUnusableRefusesBegin: an unreachable census, or one whose
// record has no identity field, refuses Begin as an unreadable baseline
// does; nothing of the session is kept.
func TestCensusUnusableRefusesBegin(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(*scoped){
		"unreachable":          func(s *scoped) { s.censusDown.Store(true) },
		"record without an id": func(s *scoped) { s.table.add(sdk.Record{"owner": "c"}) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kind := "census-down-" + strings.ReplaceAll(name, " ", "-")
			m, s := censusManager(t, kind)
			setup(s)
			_, err := m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment(kind, "  census: {census_scope: declared, options: {}}\n"), Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
			se, ok := errors.AsType[*Error](err)
			if !ok || se.Kind != Refused || se.Path != "effects[0]" || se.Code != judge.ReasonCensusUnusable || !strings.Contains(se.Message, "census") {
				t.Fatalf("err = %v, want a Refused CENSUS_UNUSABLE on effects[0]", err)
			}
			if se.TerminalOutcome != string(judge.HaltedBeforeEffect) {
				t.Errorf("terminal outcome %q, want HALTED_BEFORE_EFFECT (as an unreadable baseline)", se.TerminalOutcome)
			}
			n := 0
			if err := m.store.ForEachSession(t.Context(), func(string, []byte, []byte) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("%d sessions stored (%v), want none", n, err)
			}
		})
	}
}

// TestCensusInheritsPluginOptions: through the plugin host, a plugin
// census is configured with the candidate's options (its connection and
// table) and the census's own merged over them, never with the option the
// candidate binds to the run (option_params).
func TestCensusInheritsPluginOptions(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-options")
	dep := []byte("effects:\n  kind: census-options\n  options: {host: ledger.internal, table: visits}\n  option_params: {owner: {param: owner}}\n" +
		"  census: {census_scope: declared, options: {table: visits_all, page: '50'}}\n")
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}}); err != nil {
		t.Fatal(err)
	}
	got := s.censusOptions.Load()
	if want := map[string]string{"host": "ledger.internal", "table": "visits_all", "page": "50"}; got == nil || !maps.Equal(*got, want) {
		t.Errorf("census configured with options %v, want %v", got, want)
	}
	if n := s.censusBefore.Load(); n != 1 {
		t.Errorf("census read %d times at Begin, want 1", n)
	}
}

// TestCensusParamsRefusedAtLoad: a census that binds a run parameter is
// refused when the deployment loads, naming its path.
func TestCensusParamsRefusedAtLoad(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-param")
	dep := censusDeployment("census-param", "  census: {options: {}, option_params: {owner: {param: owner}}}\n")
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	se, ok := errors.AsType[*Error](err)
	if !ok || se.Kind != Invalid || se.Path != "deployment.effects.census.option_params" {
		t.Fatalf("err = %v, want Invalid at deployment.effects.census.option_params", err)
	}
	if s.censusBefore.Load() != 0 {
		t.Error("the census was read for a refused deployment")
	}
}

// TestRequireProvenNewness: a change claim over a narrowed read without a
// census or newness: is refused by the policy before anything is read; a
// declaration or turning the policy off lets it begin, and the result says
// how newness was (not) proven.
func TestRequireProvenNewness(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-policy")
	params := map[string]string{"owner": "a"}
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-policy", ""), Effects: []byte(effectsOwner), Params: params})
	se, ok := errors.AsType[*Error](err)
	if !ok || se.Code != workflow.CodeNewnessUnproven || se.Path != "effects[0]" || se.TerminalOutcome != OutcomeRejectedPolicy {
		t.Fatalf("err = %v, want REJECTED_POLICY newness_unproven on effects[0]", err)
	}
	for _, want := range []string{"deployment.effects (census-policy)", "option_params binds the run parameter(s) owner", "census:", "newness: whole_read", "newness: newly_matching"} {
		if !strings.Contains(se.Message, want) {
			t.Errorf("message %q does not say %q", se.Message, want)
		}
	}
	if s.after.Load()+s.censusBefore.Load() != 0 {
		t.Error("something was read for a refused Begin")
	}
	// A field_equals read-back claims no newness: the guard leaves it alone.
	noClaim := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireChangeClaim: &noClaim})
	fe := `[{"kind": "field_equals", "match": {"owner": {"param": "owner"}}, "field": "note", "value": "first", "timeout_s": 0}]`
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-policy", ""), Effects: []byte(fe), Params: params}); err != nil {
		t.Fatalf("field_equals over a narrowed read: %v", err)
	}
	m.daemon.Policy = callerContracts(nil)

	res, err := m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-policy", "  newness: newly_matching\n"), Effects: []byte(effectsOwner), Params: params})
	if err != nil {
		t.Fatalf("declared newly_matching: %v", err)
	}
	s.table.add(sdk.Record{"id": json.Number("3"), "owner": "a"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Newness != config.NewnessNewlyMatching || e.CollateralScope != config.ScopeSubject {
		t.Errorf("newness %q scope %q, want newly_matching subject", e.Newness, e.CollateralScope)
	}

	// A declared whole read is recorded as the operator's declaration.
	res, err = m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-policy", "  newness: whole_read\n"), Effects: []byte(effectsOwner), Params: params})
	if err != nil {
		t.Fatalf("declared whole_read: %v", err)
	}
	if v, err = m.Verify(context.Background(), res.SessionID); err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Newness != config.NewnessWholeReadDeclared || e.CensusScope != "" || e.CollateralScope != config.ScopeCollection {
		t.Errorf("newness %q census scope %q scope %q, want whole_read_declared, none, collection", e.Newness, e.CensusScope, e.CollateralScope)
	}

	off := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireProvenNewness: &off})
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-policy", ""), Effects: []byte(effectsOwner), Params: params}); err != nil {
		t.Fatalf("with require_proven_newness: false: %v", err)
	}
}

// TestCensusJudgesReassignment is docs/contracts.md §3a through the daemon: an
// existing record of another owner re-assigned to this one is not new
// (REFUTED, conflicting, EXISTING_RECORD_CHANGED), also when the redaction
// policy hides the identity (the stored census is keyed and restored from
// the after census). It needs the judge's census rule.
func TestCensusJudgesReassignment(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string]string{"clear": "", "keyed": "  evidence_redact_fields: [id]\n"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kind := "census-judge-" + name
			m, s := censusManager(t, kind)
			dep := censusDeployment(kind, extra+"  census: {census_scope: declared, options: {}}\n")
			params := map[string]string{"owner": "a"}
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: params})
			if err != nil {
				t.Fatal(err)
			}
			s.table.set(2, "owner", "a") // b's existing record now reads as a's
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			var codes []string
			for _, r := range e.Reasons {
				codes = append(codes, r.Code)
			}
			if e.Verdict != judge.Refuted || e.Result != judge.ClassConflicting || !strings.Contains(strings.Join(codes, ","), judge.ReasonExistingRecordChanged) {
				t.Errorf("re-assigned: %s/%s %v, want REFUTED/conflicting with EXISTING_RECORD_CHANGED", e.Verdict, e.Result, codes)
			}
			if v.Outcome != judge.ReconciliationRequired {
				t.Errorf("outcome %s, want RECONCILIATION_REQUIRED", v.Outcome)
			}
		})
	}
}

// TestCensusReverify: a session that did not verify keeps its census with
// its baseline, and Reverify reads the census again.
func TestCensusReverify(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-reverify")
	dep := censusDeployment("census-reverify", "  census: {census_scope: declared, options: {}}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("nothing saved: %s", v.Outcome)
	}
	before := s.censusAfter.Load()
	s.table.add(sdk.Record{"id": json.Number("3"), "owner": "a"})
	r, err := m.Reverify(context.Background(), res.SessionID, "saved it by hand")
	if err != nil {
		t.Fatal(err)
	}
	if s.censusAfter.Load() == before {
		t.Error("Reverify did not read the census")
	}
	if e := r.Effects[0]; e.Verdict != judge.Confirmed || e.Newness != config.NewnessCensus {
		t.Errorf("reverify %s newness %q, want CONFIRMED census", e.Verdict, e.Newness)
	}
}

// TestCensusKeyedUnderRedaction: when the redaction policy hides the
// identity field, the stored census holds no identity in clear, and an
// honest new record still confirms (the census is restored from the reads
// after the action).
func TestCensusKeyedUnderRedaction(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-keyed")
	s.table.set(1, "id", "patient-secret-1")
	dep := censusDeployment("census-keyed", "  evidence_redact_fields: [id]\n  census: {census_scope: declared, options: {}}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	if err := m.store.ReadBaseline(t.Context(), res.SessionID, store.CensusCapture(0), func(rec []byte) error {
		stored = append(stored, string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || strings.Contains(strings.Join(stored, ","), "patient-secret-1") {
		t.Fatalf("stored census %v: want 2 records, no identity in clear", stored)
	}
	s.table.add(sdk.Record{"id": json.Number("3"), "owner": "a"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Verdict != judge.Confirmed || e.Newness != config.NewnessCensus {
		t.Errorf("keyed census: %s %v, want CONFIRMED", e.Verdict, e.Reasons)
	}
}

// TestCensusPreflight: preflight reports each candidate's newness and what
// narrows it, and a census that cannot be read makes its candidate
// unusable (every Begin through it would be refused).
func TestCensusPreflight(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-preflight")
	params := map[string]string{"owner": "a"}
	checks, err := m.TestConnection(context.Background(), censusDeployment("census-preflight", ""), "", params)
	if err != nil {
		t.Fatal(err)
	}
	if c := checks[0]; !c.Reachable || c.Newness != config.NewnessNewlyMatching || c.NewnessDeclared || len(c.Narrowing) != 2 {
		t.Errorf("without census: %+v", c)
	}
	checks, err = m.TestConnection(context.Background(), censusDeployment("census-preflight", "  census: {census_scope: declared, options: {}}\n"), "", params)
	if err != nil {
		t.Fatal(err)
	}
	if c := checks[0]; !c.Reachable || c.Newness != config.NewnessCensus || !c.NewnessDeclared {
		t.Errorf("with census: %+v", c)
	}
	s.censusDown.Store(true)
	checks, err = m.TestConnection(context.Background(), censusDeployment("census-preflight", "  census: {census_scope: declared, options: {}}\n"), "", params)
	if err != nil {
		t.Fatal(err)
	}
	if c := checks[0]; c.Reachable || !strings.Contains(c.Message, "census: census offline") {
		t.Errorf("census down: %+v, want unreachable naming the census", c)
	}
}

// TestCensusInReceipt: the signed receipt binds each effect's newness and
// collateral scope, and the census reads by keyed digest.
func TestCensusInReceipt(t *testing.T) {
	t.Parallel()
	m, s := censusManager(t, "census-receipt")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	m.signer = signing.New(priv)
	dep := censusDeployment("census-receipt", "  census: {census_scope: declared, options: {}}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	s.table.add(sdk.Record{"id": json.Number("3"), "owner": "a"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	p := openReceipt(t, m, v.Receipt)
	if e := p.Effects[0]; e.Newness != config.NewnessCensus || e.CensusScope != config.CensusScopeDeclared || e.CollateralScope != config.ScopeCollection {
		t.Errorf("receipt effect newness %q census scope %q scope %q, want census declared collection", e.Newness, e.CensusScope, e.CollateralScope)
	}
	if len(p.Census) != 1 || p.Census[0] == nil {
		t.Fatalf("receipt census reads %+v, want one", p.Census)
	}
	c := p.Census[0]
	if !c.Before.Reachable || c.Before.Records != 2 || !c.After.Reachable || c.After.Records != 3 ||
		!strings.HasPrefix(c.Before.Digest, "hmac-sha256:") || c.Before.Digest == c.After.Digest {
		t.Errorf("census reads %+v, want 2 before and 3 after, keyed digests that differ", c)
	}
	// Without a census the receipt has no census_reads at all.
	m2, _ := censusManager(t, "census-receipt-none")
	m2.signer = m.signer
	res, err = m2.Begin(context.Background(), BeginRequest{Deployment: censusDeployment("census-receipt-none", "  newness: newly_matching\n"), Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err = m2.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if env, _ := receipt.ParseEnvelope(v.Receipt); env == nil || strings.Contains(string(mustOpen(t, m2, v.Receipt)), "census_reads") {
		t.Error("a receipt without a census names census_reads")
	}
}

func mustOpen(t *testing.T, m *Manager, raw json.RawMessage) []byte {
	t.Helper()
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := env.Open(m.signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// TestCensusRefusedByItsAdapter: a census section its adapter refuses is
// invalid input at the census's path, and nothing of the session is kept.
func TestCensusRefusedByItsAdapter(t *testing.T) {
	t.Parallel()
	m, _ := censusManager(t, "census-bad")
	dep := censusDeployment("census-bad", "  census: {census_scope: declared, options: {bad: x}}\n")
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsOwner), Params: map[string]string{"owner": "a"}})
	se, ok := errors.AsType[*Error](err)
	if !ok || se.Kind != Invalid || se.Path != "deployment.effects.census.options.bad" {
		t.Fatalf("err = %v, want Invalid at deployment.effects.census.options.bad", err)
	}
	n := 0
	if err := m.store.ForEachSession(t.Context(), func(string, []byte, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("%d sessions stored (%v), want none", n, err)
	}
}

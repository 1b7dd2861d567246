package session

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// randomWireRead makes the records of one read as an adapter sends them:
// one JSON object each, values written several ways (numbers with source
// text that is not canonical, escapes, nested values, nulls, missing
// identities).
func randomWireRead(rng *rand.Rand, n int, ordered bool) [][]byte {
	values := []string{`"p1"`, `"p2"`, `1`, `1.0`, `"1"`, `10e-1`, `2.50`, `true`, `"true"`, `null`, `{"b":1,"a":[2.50,"x"]}`,
		`[1,2]`, `"Zoë"`, `"Zo\u00eb"`, `-0`, `"a\"b"`, `123456789012345678901234567890123`}
	ids := rng.Perm(n*2 + 1)[:n]
	if ordered {
		slices.Sort(ids)
	}
	out := make([][]byte, n)
	for i := range n {
		var sb strings.Builder
		sb.WriteByte('{')
		sep := ""
		switch rng.IntN(8) {
		case 0: // no identity
		case 1:
			fmt.Fprintf(&sb, `"id":"%d"`, ids[i])
			sep = ","
		default:
			fmt.Fprintf(&sb, `"id":%d`, ids[i])
			sep = ","
		}
		for _, f := range []string{"patient_id", "type", "key", "note"} {
			if rng.IntN(5) == 0 {
				continue
			}
			fmt.Fprintf(&sb, `%s"%s":%s`, sep, f, values[rng.IntN(len(values))])
			sep = ","
		}
		sb.WriteByte('}')
		out[i] = []byte(sb.String())
	}
	return out
}

// mapRead is the session's former path: every record decoded into a map.
func mapRead(t *testing.T, raws [][]byte) judge.Snapshot {
	t.Helper()
	s := judge.Snapshot{Reachable: true, Records: []judge.Record{}}
	if len(raws) == 0 {
		return s
	}
	for _, raw := range raws {
		r, err := decodeRecord(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		s.Records = append(s.Records, r)
	}
	return s
}

// compactRead is the session's path: the records streamed into a batch.
func compactRead(t *testing.T, raws [][]byte) *read {
	t.Helper()
	rs := judge.NewRecordStream("records", len(raws))
	for _, raw := range raws {
		if err := rs.Add(raw); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return &read{snap: judge.BatchSnapshot{Reachable: true, Batch: rs.Batch()}}
}

// projectedRead is the session's path under a projection: the records
// streamed with their digest, kept as p says.
func projectedRead(t *testing.T, m *Manager, raws [][]byte, p *judge.Projection) *read {
	t.Helper()
	rs := m.evidence().newReadStream("records", len(raws), p)
	for _, raw := range raws {
		if err := rs.Add(raw); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return rs.read()
}

// TestCompactPathAgreesWithMaps judges random reads both ways: the
// session's compact path (RecordStream, JudgeBatch) gives the verdict the
// map path gave, field for field, matched records included (numbers keep
// the adapter's text), and the same read digests; so do reads projected
// for the contract judged.
func TestCompactPathAgreesWithMaps(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 1))
	docs := []string{
		`{"kind": "record_written", "match": {"patient_id": "p1"}}`,
		`{"kind": "record_written", "match": {"patient_id": "1"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": "true"}, "idempotency_key": "1", "forbid_collateral_loss": false}`,
		`{"kind": "record_written", "match": {}, "expected_count": 3, "identity_field": "note"}`,
		`{"kind": "record_written", "match": {"note": "2.5"}, "count_new_only": true, "expected_count": 1}`,
		`{"kind": "field_equals", "match": {"patient_id": "p2"}, "field": "note", "value": "Zoë"}`,
		`{"kind": "field_equals", "match": {"id": "1"}, "field": "type", "value": "1"}`,
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "match": {"type": "p2"}, "new_records": [{"note": "1"}, {"note": "1"}], "expected_count": 2}`,
	}
	var contracts []*judge.Contract
	for i, doc := range docs {
		tree, err := judge.DecodeJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		e, err := judge.LoadEffect(tree, "effects[0]")
		if err != nil {
			t.Fatalf("contract %d: %v", i, err)
		}
		c, err := judge.Bind(e, nil, "effects[0]")
		if err != nil {
			t.Fatal(err)
		}
		contracts = append(contracts, c)
	}
	m := &Manager{}
	decided := map[judge.Decision]int{}
	matched := 0
	for round := range 300 {
		ordered := round%2 == 0
		braw, araw := randomWireRead(rng, rng.IntN(14), ordered), randomWireRead(rng, rng.IntN(14), ordered)
		bm, am := mapRead(t, braw), mapRead(t, araw)
		bc, ac := compactRead(t, braw), compactRead(t, araw)
		if got, want := m.evidence().readDigestOf(ac), m.evidence().readDigest(am); got != want {
			t.Fatalf("round %d: digest %+v, want %+v", round, got, want)
		}
		for k, c := range contracts {
			want := judge.Judge(c, bm, am, judge.Options{})
			got := judge.JudgeBatch(c, bc.snap, ac.snap, judge.Options{})
			// Judge itself leaves no match as nil or empty; every
			// consumer ranges over it (results show both as []).
			if len(got.Matched) == 0 && len(want.Matched) == 0 {
				got.Matched = want.Matched
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("round %d, contract %d: compact path\n%s\nmap path\n%s", round, k, gj, wj)
			}
			// The session's path: each read streamed with its digest and
			// kept only as far as the contract reads it.
			group := []*judge.Contract{c}
			pb, pa := projectedRead(t, m, braw, judge.ProjectBaseline(group)), projectedRead(t, m, araw, judge.ProjectAfter(group))
			if m.evidence().readDigestOf(pb) != m.evidence().readDigest(bm) || m.evidence().readDigestOf(pa) != m.evidence().readDigest(am) {
				t.Fatalf("round %d, contract %d: projected reads' digests %+v %+v, want %+v %+v", round, k, m.evidence().readDigestOf(pb), m.evidence().readDigestOf(pa), m.evidence().readDigest(bm), m.evidence().readDigest(am))
			}
			got = judge.JudgeBatch(c, pb.snap, pa.snap, judge.Options{})
			if len(got.Matched) == 0 && len(want.Matched) == 0 {
				got.Matched = want.Matched
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("round %d, contract %d: projected path\n%s\nmap path\n%s", round, k, gj, wj)
			}
			decided[want.Decision]++
			matched += len(want.Matched)
		}
		// The map form made for redaction is the map path's records.
		if !reflect.DeepEqual(ac.snapshot(), am) {
			t.Fatalf("round %d: map form %v, want %v", round, ac.snapshot().Records, am.Records)
		}
	}
	if decided[judge.Confirmed] == 0 || decided[judge.Refuted] == 0 || matched == 0 {
		t.Fatalf("decisions %v, %d matched records: the generator does not exercise the judge", decided, matched)
	}
}

// rawValue is a record value whose JSON the adapter writes itself: here an
// object with a duplicate key, which encoding/json lets through.
type rawValue string

func (n rawValue) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// TestBadWireRecordIsIndeterminate: an after read whose record has a
// duplicate key is no read set; the effect is INDETERMINATE with a reason
// naming the record and field, never CONFIRMED.
func TestBadWireRecordIsIndeterminate(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "dupkey-test", tier: 1, table: tab})
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: dupkey-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
	tab.add(sdk.Record{"id": json.Number("2"), "p": "2", "note": rawValue(`{"a":1,"a":2}`)})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	e := v.Effects[0]
	if e.Verdict != judge.Indeterminate || len(e.Reasons) == 0 || e.Reasons[0].Code != judge.ReasonSORUnreachable {
		t.Fatalf("verdict %s %v, want INDETERMINATE %s", e.Verdict, e.Reasons, judge.ReasonSORUnreachable)
	}
	if msg := e.Reasons[0].Message; !strings.Contains(msg, "records[1].note") || !strings.Contains(msg, "duplicate") {
		t.Errorf("reason %q does not name the record, the field and the fault", msg)
	}
}

// checking is a memAdapter that binds run parameters: it counts the
// CheckParams calls and refuses a session without "p".
type checking struct {
	*memAdapter
	checks atomic.Int32
}

func (c *checking) CheckParams(_ context.Context, params map[string]string) error {
	c.checks.Add(1)
	if params["p"] == "" {
		return &refusal.Error{Path: "params.p", Message: "missing"}
	}
	return nil
}

// TestVerifySkipsCheckParams: Begin asks the adapter to check the run
// parameters before reading; Verify does not ask again (one round trip
// fewer) and still judges.
func TestVerifySkipsCheckParams(t *testing.T) {
	t.Parallel()
	tab := &table{}
	a := &checking{memAdapter: &memAdapter{kind: "checkparams-test", tier: 1, table: tab}}
	m := newManager(t, a)
	dep := []byte("effects: {kind: checkparams-test, newness: whole_read}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	before := a.checks.Load()
	if before != 1 {
		t.Fatalf("%d CheckParams calls for one Begin, want 1", before)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Effects[0].Verdict != judge.Confirmed {
		t.Fatalf("verdict %s %v, want CONFIRMED", v.Effects[0].Verdict, v.Effects[0].Reasons)
	}
	if got := a.checks.Load(); got != before {
		t.Errorf("Verify made %d CheckParams calls, want none", got-before)
	}
}

// TestProjectionOnlyWithoutRedaction: a group's reads are kept in part
// only when nothing is redacted (masking adapter text and restoring a
// keyed baseline read whole records); were a projected read ever given to
// the redaction of adapter text, the text would be withheld, never shown
// unmasked.
func TestProjectionOnlyWithoutRedaction(t *testing.T) {
	t.Parallel()
	policy := judge.Redaction{RedactFields: []string{"ssn"}}
	for _, tt := range []struct {
		name    string
		keyID   string
		policy  judge.Redaction
		project bool
	}{
		{"nothing redacted", "", judge.Redaction{}, true},
		{"a redaction policy", "", policy, false},
		{"a keyed baseline", "k1", judge.Redaction{}, false},
	} {
		g := &group{cm: captureMeta{KeyID: tt.keyID}, cand: &config.Candidate{Redaction: tt.policy}}
		if got := g.projection(); got != tt.project {
			t.Errorf("%s: projection %v, want %v", tt.name, got, tt.project)
		}
	}
	m := &Manager{}
	c, err := judge.Bind(judge.Effect{Kind: judge.RecordWritten, Match: judge.Selector{"patient_id": {Literal: "p1"}},
		ExpectedCount: 1, KeyField: judge.DefaultKeyField, IdentityField: judge.DefaultIdentityField}, nil, "effects[0]")
	if err != nil {
		t.Fatal(err)
	}
	raws := [][]byte{[]byte(`{"id": 1, "patient_id": "p0", "ssn": "123-45-6789"}`)}
	after := projectedRead(t, m, raws, judge.ProjectAfter([]*judge.Contract{c}))
	if !after.projected() {
		t.Fatal("the record matching no selector was kept whole")
	}
	kb := keyedBaseline{base: compactRead(t, nil), policy: policy, group: []*judge.Contract{c}}
	if got := kb.redactText("failed on ssn 123-45-6789", after); strings.Contains(got, "123-45-6789") || !strings.Contains(got, "withheld") {
		t.Fatalf("redacted text %q", got)
	}
	whole := compactRead(t, raws)
	if got := kb.redactText("failed on ssn 123-45-6789", whole); strings.Contains(got, "123-45-6789") || strings.Contains(got, "withheld") {
		t.Fatalf("redacted text of a whole read %q", got)
	}
}

// TestBaselinePanicReachesVerify: the stored baseline streams on its own
// goroutine; a panic there is raised again where Verify waits for it (the
// server recovers a call's panic there), never on a goroutine of its own
// that would end the daemon.
func TestBaselinePanicReachesVerify(t *testing.T) {
	t.Parallel()
	// No store: reading the baseline panics.
	g := &group{m: &Manager{}, cm: captureMeta{Reachable: true, Records: 3}, cand: &config.Candidate{}, ev: &groupEvidence{}}
	g.startBaseline(context.Background())
	defer func() {
		if recover() == nil {
			t.Fatal("the baseline goroutine's panic was not raised where Verify waits")
		}
		g.waitBaseline() // raised once: a second wait returns
	}()
	g.waitBaseline()
}

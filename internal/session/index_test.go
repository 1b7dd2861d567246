package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// indexEffects judge one read: effects 0 and 1 need the baseline (new
// records only; collateral loss), 2 reads a field back, 3 an exact set.
const indexEffects = `[
  {"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "expected_count": 2, "timeout_s": 0.02},
  {"kind": "record_written", "match": {"type": "visit"}, "count_new_only": true, "timeout_s": 0.02},
  {"kind": "field_equals", "match": {"id": "7"}, "field": "note", "value": "Zoë", "timeout_s": 0.02},
  {"kind": "exact_new_set", "match": {"p": {"param": "p"}}, "new_records": [{"type": "visit"}, {"type": "lab"}], "expected_count": 2, "timeout_s": 0.02}
]`

// indexRows makes n rows of values written several ways.
func indexRows(rng *rand.Rand, from, n int) []sdk.Record {
	values := []any{"1", "2", json.Number("1"), json.Number("1.0"), json.Number("10e-1"), true, nil, "Zoë", "a\"b", "visit", "lab",
		map[string]any{"b": 1, "a": []any{json.Number("2.50"), "x"}}}
	var out []sdk.Record
	for i := range n {
		r := sdk.Record{}
		if rng.IntN(9) != 0 {
			r["id"] = json.Number(fmt.Sprint(from + i))
		}
		for _, f := range []string{"p", "type", "note", "extra"} {
			if rng.IntN(4) != 0 {
				r[f] = values[rng.IntN(len(values))]
			}
		}
		out = append(out, r)
	}
	return out
}

// storedMeta is session id's stored metadata.
func storedMeta(t *testing.T, m *Manager, id string) meta {
	t.Helper()
	raw, _, err := m.store.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	return md
}

// wholeTwin stores session id of m as a daemon before indexes stored it:
// the same meta without the index's form and digest, and the baseline's
// records whole as the adapter sends them (read again: the table has not
// changed). It returns a Manager over that store, with m's keys.
func wholeTwin(t *testing.T, m *Manager, adapter sdk.Adapter, id string, mutate func(*meta, [][]byte) [][]byte) *Manager {
	t.Helper()
	ctx := context.Background()
	md := storedMeta(t, m, id)
	dep, contracts, err := parse(md.Deployment, md.Effects, md.Params)
	if err != nil {
		t.Fatal(err)
	}
	insts, errs := m.configure(ctx, dep, contracts, md.Params, forCheck)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	cm := md.Captures[0]
	capt, err := insts[0].CaptureBefore(ctx, captureRequest(id, "before", 0, contracts, cm.Effects))
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for batch, err := range capt.RawBatches() {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range batch {
			recs = append(recs, bytes.Clone(r))
		}
	}
	capt.Close()
	md.Captures[0].Index, md.Captures[0].Digest, md.Captures[0].DigestKeyID = 0, "", ""
	if mutate != nil {
		recs = mutate(&md, recs)
	}
	twin := newManager(t, adapter)
	twin.keys, twin.signer = m.keys, m.signer
	w := twin.store.NewBaseline(id, 0)
	for _, r := range recs {
		if err := w.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := twin.store.CreateSessionLedger(t.Context(), id, raw, func(l store.Ledger) error {
		_, err := l.Append(EntryBegin, id, jsonDigest(&md.Begin))
		return err
	}, w); err != nil {
		t.Fatal(err)
	}
	return twin
}

// runOf is a result without what differs between two runs (the
// time, the receipt's envelope), and the receipt's payload without its
// time.
func runOf(t *testing.T, m *Manager, r *Result) (string, string) {
	t.Helper()
	p := openReceipt(t, m, r.Receipt)
	p.IssuedAt, p.Ledger.Head = time.Time{}, "" // the ledgers hold other times
	out := *r
	out.VerifiedAt, out.Receipt = time.Time{}, nil
	rj, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	pj, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(rj), string(pj)
}

// TestIndexedBaselineAgreesWithWhole: Begin stores the baseline as an
// index (each record kept as far as the contracts read it, the read's
// digest taken at Begin); Verify and Reverify over it give what they give
// over the same baseline stored whole (a session begun before indexes):
// verdicts, reasons, counts, matched records, evidence digests and the
// receipts' payloads, field for field.
func TestIndexedBaselineAgreesWithWhole(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	decided := map[judge.Decision]int{}
	count := func(d judge.Decision) {
		mu.Lock()
		decided[d]++
		mu.Unlock()
	}
	// The rounds are independent, each with its own random stream, and run
	// side by side: most of a round is waiting out its effects' timeouts.
	t.Run("rounds", func(t *testing.T) {
		for round := range 12 {
			t.Run(fmt.Sprint(round), func(t *testing.T) {
				t.Parallel()
				indexRound(t, rand.New(rand.NewPCG(14, uint64(round))), round, count)
			})
		}
	})
	if decided[judge.Confirmed] == 0 || decided[judge.Refuted] == 0 || decided["reverified"] == 0 {
		t.Fatalf("verdicts %v: the rounds do not exercise the judge", decided)
	}
	t.Logf("verdicts %v", decided)
}

// indexRound is one round of TestIndexedBaselineAgreesWithWhole: a random
// table, Begin, random changes, then Verify (and Reverify when the first
// outcome is not VERIFIED) through the index and through a whole baseline.
func indexRound(t *testing.T, rng *rand.Rand, round int, count func(judge.Decision)) {
	tab := &table{}
	a := &memAdapter{kind: fmt.Sprintf("index-test-%d", round), tier: 1, table: tab}
	m := signedManager(t, a)
	m.keys = newEvidenceKeys(bytes.Repeat([]byte{byte(round + 1)}, EvidenceKeySize))
	for _, r := range indexRows(rng, 0, 5+rng.IntN(60)) {
		tab.add(r)
	}
	dep := []byte(fmt.Sprintf("effects: {kind: %s, newness: whole_read}\n", a.kind))
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(indexEffects), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.SessionID
	md := storedMeta(t, m, id)
	if cm := md.Captures[0]; cm.Index != baselineIndexV1 || !strings.HasPrefix(cm.Digest, "hmac-sha256:") || cm.DigestKeyID != judge.KeyID(m.keys.key()) {
		t.Fatalf("round %d: capture %+v is not stored as an index", round, cm)
	}
	marks := map[byte]int{}
	if err := m.store.ReadBaseline(t.Context(), id, 0, func(e []byte) error { marks[e[0]]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(marks) == 0 || marks[judge.IndexWhole]+marks[judge.IndexPartial] != md.Captures[0].Records || marks[judge.IndexPartial] == 0 {
		t.Fatalf("round %d: entries %v for %d records", round, marks, md.Captures[0].Records)
	}
	twin := wholeTwin(t, m, a, id, nil)
	for _, r := range indexRows(rng, 1000, rng.IntN(5)) {
		tab.add(r)
	}
	if rng.IntN(3) == 0 { // a record gone: collateral loss
		tab.mu.Lock()
		tab.rows = tab.rows[1:]
		tab.mu.Unlock()
	}
	got, err := m.Verify(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := twin.Verify(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	gr, gp := runOf(t, m, got)
	wr, wp := runOf(t, twin, want)
	if d := cmp.Diff(wr, gr); d != "" {
		t.Fatalf("round %d: result (-whole +index):\n%s", round, d)
	}
	if d := cmp.Diff(wp, gp); d != "" {
		t.Fatalf("round %d: receipt (-whole +index):\n%s", round, d)
	}
	if p := openReceipt(t, m, got.Receipt); p.Baseline[0].Records != md.Captures[0].Records || p.Baseline[0].Digest != md.Captures[0].Digest {
		t.Fatalf("round %d: baseline evidence %+v, Begin stored %+v", round, p.Baseline[0], md.Captures[0])
	}
	for _, e := range got.Effects {
		count(e.Verdict)
	}
	if got.Outcome == judge.Verified {
		return
	}
	// Re-verification reads the same stored baseline.
	tab.add(sdk.Record{"id": json.Number("5000"), "p": "1", "type": "visit"})
	got, err = m.Reverify(context.Background(), id, "added the visit")
	if err != nil {
		t.Fatal(err)
	}
	want, err = twin.Reverify(context.Background(), id, "added the visit")
	if err != nil {
		t.Fatal(err)
	}
	gr, gp = runOf(t, m, got)
	wr, wp = runOf(t, twin, want)
	if d := cmp.Diff(wr, gr); d != "" {
		t.Fatalf("round %d: re-verification (-whole +index):\n%s", round, d)
	}
	if d := cmp.Diff(wp, gp); d != "" {
		t.Fatalf("round %d: re-verification receipt (-whole +index):\n%s", round, d)
	}
	count("reverified")
}

// TestUnreadableIndexIsIndeterminate: anything unexpected in a stored
// index (an entry without its mark, a form this daemon does not know, no
// digest or one under another key, a count that differs) makes the
// baseline unreadable: the effects that need it are INDETERMINATE, never
// CONFIRMED. The same session stored well is CONFIRMED.
func TestUnreadableIndexIsIndeterminate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		mutate func(*meta, [][]byte) [][]byte
		want   judge.Decision
		reason string
	}{
		{"as stored", nil, judge.Confirmed, ""},
		{"whole", func(md *meta, recs [][]byte) [][]byte {
			md.Captures[0].Index, md.Captures[0].Digest, md.Captures[0].DigestKeyID = 0, "", ""
			return unmark(recs)
		}, judge.Confirmed, ""},
		{"bad mark", func(_ *meta, recs [][]byte) [][]byte { recs[1][0] = 'X'; return recs }, judge.Indeterminate, "no W or P mark"},
		{"lower-case mark", func(_ *meta, recs [][]byte) [][]byte { recs[0][0] = 'p'; return recs }, judge.Indeterminate, "no W or P mark"},
		{"unmarked", func(_ *meta, recs [][]byte) [][]byte { return unmark(recs) }, judge.Indeterminate, "no W or P mark"},
		{"form 2", func(md *meta, recs [][]byte) [][]byte { md.Captures[0].Index = 2; return recs }, judge.Indeterminate, "form 2"},
		{"no digest", func(md *meta, recs [][]byte) [][]byte { md.Captures[0].Digest = ""; return recs }, judge.Indeterminate, "no digest"},
		{"other key", func(md *meta, recs [][]byte) [][]byte { md.Captures[0].DigestKeyID = "0011223344556677"; return recs }, judge.Indeterminate, "another evidence key"},
		{"count", func(md *meta, recs [][]byte) [][]byte { md.Captures[0].Records++; return recs }, judge.Indeterminate, "holds 3 records"},
		{"redaction policy", func(md *meta, recs [][]byte) [][]byte {
			md.Deployment = bytes.Replace(md.Deployment, []byte("}"), []byte(", evidence_redact_fields: [note]}"), 1)
			return recs
		}, judge.Indeterminate, "redaction policy"},
		{"partial record", func(_ *meta, recs [][]byte) [][]byte { recs[2] = []byte(`P{"id":`); return recs }, judge.Indeterminate, "records[2]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			a := &memAdapter{kind: "unreadable-index-" + strings.ReplaceAll(tt.name, " ", "-"), tier: 1, table: tab}
			m := signedManager(t, a)
			m.keys = newEvidenceKeys(bytes.Repeat([]byte{7}, EvidenceKeySize))
			tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
			tab.add(sdk.Record{"id": json.Number("2"), "p": "2"})
			tab.add(sdk.Record{"id": json.Number("3"), "p": "3", "note": "x"})
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte(fmt.Sprintf("effects: {kind: %s, newness: whole_read}\n", a.kind)),
				Effects: []byte(`[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "timeout_s": 0.1}]`)})
			if err != nil {
				t.Fatal(err)
			}
			id := res.SessionID
			var stored [][]byte
			if err := m.store.ReadBaseline(t.Context(), id, 0, func(e []byte) error { stored = append(stored, bytes.Clone(e)); return nil }); err != nil {
				t.Fatal(err)
			}
			twin := wholeTwin(t, m, a, id, func(md *meta, _ [][]byte) [][]byte {
				src, _, _ := m.store.Session(t.Context(), id)
				if err := json.Unmarshal(src, md); err != nil {
					t.Fatal(err)
				}
				if tt.mutate == nil {
					return stored
				}
				return tt.mutate(md, stored)
			})
			tab.add(sdk.Record{"id": json.Number("4"), "p": "1"})
			v, err := twin.Verify(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			if e.Verdict != tt.want {
				t.Fatalf("verdict %s %v, want %s", e.Verdict, e.Reasons, tt.want)
			}
			if tt.reason != "" && (len(e.Reasons) == 0 || !strings.Contains(e.Reasons[0].Message, tt.reason) ||
				!strings.Contains(e.Reasons[0].Message, "the stored baseline could not be read")) {
				t.Fatalf("reasons %v do not say %q", e.Reasons, tt.reason)
			}
		})
	}
}

// unmark is an index's entries without their marks: the records kept
// whole as they arrived, the others as the index kept them.
func unmark(recs [][]byte) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = r[1:]
	}
	return out
}

// TestBadBaselineRecordIsIndeterminate: a baseline record that is not one
// JSON object (here a duplicate key) is stored as it arrived, with no
// digest; Verify finds the baseline unreadable, naming the record and the
// fault, as it did when every baseline was stored whole.
func TestBadBaselineRecordIsIndeterminate(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "bad-baseline-index-test", tier: 1, table: tab})
	tab.add(sdk.Record{"id": json.Number("1"), "p": "2"})
	tab.add(sdk.Record{"id": json.Number("2"), "p": "2", "note": rawValue(`{"a":1,"a":2}`)})
	tab.add(sdk.Record{"id": json.Number("3"), "p": "2"})
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: bad-baseline-index-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	md := storedMeta(t, m, res.SessionID)
	if cm := md.Captures[0]; cm.Index != baselineIndexV1 || cm.Digest != "" || cm.Records != 3 {
		t.Fatalf("capture %+v: want an index without a digest", cm)
	}
	tab.mu.Lock()
	tab.rows[1] = sdk.Record{"id": json.Number("2"), "p": "2"} // the after read is sound
	tab.mu.Unlock()
	tab.add(sdk.Record{"id": json.Number("4"), "p": "1"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	e := v.Effects[0]
	if e.Verdict != judge.Indeterminate || len(e.Reasons) == 0 {
		t.Fatalf("verdict %s %v, want INDETERMINATE", e.Verdict, e.Reasons)
	}
	if msg := e.Reasons[0].Message; !strings.Contains(msg, "the stored baseline's records[1].note") || !strings.Contains(msg, "duplicate") {
		t.Errorf("reason %q does not name the record, the field and the fault", msg)
	}
}

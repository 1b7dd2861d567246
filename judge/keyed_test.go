package judge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestKeyedDigester(t *testing.T) {
	t.Parallel()
	rec := recs(t, `[{"patient_id": "p1", "id": "1"}]`)[0]
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(`{"id":"1","patient_id":"p1"}`))
	want := "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	got := KeyedDigester(testKey)(rec)
	if got != want {
		t.Errorf("KeyedDigester = %s, want %s", got, want)
	}
	if other := KeyedDigester([]byte("another key, another digest....."))(rec); other == got {
		t.Errorf("two keys gave one digest %s", got)
	}
	if strings.Contains(got, strings.TrimPrefix(RecordDigest(rec), "sha256:")) {
		t.Errorf("the keyed digest carries the unkeyed one")
	}
	h := NewKeyedHash(testKey)
	h.Write([]byte(`{"id":"1","patient_id":"p1"}`))
	if sum := KeyedSum(h); sum != want {
		t.Errorf("KeyedSum = %s, want %s", sum, want)
	}
}

func TestTasksWithKeyedDigests(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "risk": "irreversible"}`, nil)
	before := read(t, `[{"id": "0", "patient_id": "p0"}]`)
	after := read(t, `[{"id": "0", "patient_id": "p0"}, {"id": "1", "patient_id": "p1"}, {"id": "2", "patient_id": "p1"}]`)
	v := Judge(c, before, after, Options{})
	digest := KeyedDigester(testKey)

	plain := NewTask("s", 0, "sql", c, &v, TaskOptions{})
	keyed := NewTask("s", 0, "sql", c, &v, TaskOptions{Digest: digest})
	want := []string{digest(after.Records[1]), digest(after.Records[2])}
	if d := cmp.Diff(want, keyed.Evidence.RecordDigests); d != "" {
		t.Errorf("record digests (-want +got):\n%s", d)
	}
	if keyed.ID != plain.ID || keyed.SuggestedAction != ActionRemoveDuplicates {
		t.Errorf("keyed task %+v differs from the plain one %+v beyond its digests", keyed, plain)
	}

	failed := NewTask("s", 0, "sql", c, &v, TaskOptions{CompensationFailed: true, Deleted: after.Records[2:], Digest: digest})
	if d := cmp.Diff(want, failed.Evidence.RecordDigests); d != "" {
		t.Errorf("compensation_failed record digests (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{digest(after.Records[2])}, failed.Evidence.DeletedDigests); d != "" {
		t.Errorf("deleted digests (-want +got):\n%s", d)
	}
	if failed.Kind != TaskCompensationFailed || failed.ID != NewTask("s", 0, "sql", c, &v, TaskOptions{CompensationFailed: true, Deleted: nil}).ID {
		t.Errorf("compensation_failed task %+v", failed)
	}

	conf := Verdict{Decision: Confirmed}
	if NewTask("s", 0, "sql", c, &conf, TaskOptions{Digest: digest}) != nil || NewTask("s", 0, "sql", c, &conf, TaskOptions{CompensationFailed: true, Deleted: nil, Digest: digest}) != nil {
		t.Errorf("a confirmed verdict got a task")
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "field_equals", "match": {"patient_id": "PID-7", "type": "Triage"}, "field": "note", "value": "expected note"}`, nil)
	records := recs(t, `[{"id": 12345, "patient_id": "PID-7", "ssn": "123-45-6789", "note": "observed note", "type": "Triage",
		"card": {"pan": "4111-1111"}, "flag": "x", "amount": 12.50}]`)
	tests := map[string]struct {
		policy Redaction
		text   string
		want   string
	}{
		"deny: record value": {
			policy: Redaction{RedactFields: []string{"ssn"}},
			text:   `no such row: ssn=123-45-6789 for PID-7`,
			want:   `no such row: ssn=[REDACTED] for PID-7`,
		},
		"deny: contract values of hidden fields": {
			policy: Redaction{RedactFields: []string{"note", "patient_id"}},
			text:   `note "expected note" != "observed note" (patient PID-7)`,
			want:   `note "[REDACTED]" != "[REDACTED]" (patient [REDACTED])`,
		},
		"deny: kept fields stay": {
			policy: Redaction{RedactFields: []string{"ssn"}},
			text:   `Triage 12345 observed note`,
			want:   `Triage 12345 observed note`,
		},
		"allow: everything not kept": {
			policy: Redaction{KeepFields: []string{"type"}},
			text:   `row 12345 (Triage) ssn 123-45-6789 pan 4111-1111 amount 12.5 or 12.50`,
			want:   `row [REDACTED] (Triage) ssn [REDACTED] pan [REDACTED] amount [REDACTED] or [REDACTED]`,
		},
		"URL-escaped forms": {
			policy: Redaction{RedactFields: []string{"note"}},
			text:   `DELETE /rows/observed%20note?n=observed+note failed`,
			want:   `DELETE /rows/[REDACTED]?n=[REDACTED] failed`,
		},
		"single characters are not searched": {
			policy: Redaction{RedactFields: []string{"flag"}},
			text:   `x marks the spot`,
			want:   `x marks the spot`,
		},
		"longest first, markers not searched again": {
			policy: Redaction{KeepFields: []string{"id"}},
			text:   `PID-7 and Triage and [REDACTED] stay masked once`,
			want:   `[REDACTED] and [REDACTED] and [REDACTED] stay masked once`,
		},
		"inactive policy": {
			text: `ssn 123-45-6789`,
			want: `ssn 123-45-6789`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := tc.policy.RedactText(tc.text, []*Contract{c}, records); got != tc.want {
				t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.text, got, tc.want)
			}
		})
	}
}

// shownVerdict is everything a client sees of a verdict after redaction.
type shownVerdict struct {
	Decision                     Decision
	Class                        Class
	Reasons                      []Reason
	Observed, Expected           *int
	ObservedValue, ExpectedValue *string
	Matched                      []Record
	Hash                         string
	Stale, Unavailable           bool
	// Lost, Changed count the structured identity lists: a keyed
	// identity that nothing restores stays a token there, so only the
	// counts can agree.
	Lost, Changed int
}

func showVerdict(p Redaction, c *Contract, v Verdict) shownVerdict {
	r := p.Apply(v, c)
	return shownVerdict{r.Decision, r.Class, r.Reasons, r.ObservedCount, r.ExpectedCount, r.ObservedValue, r.ExpectedValue, r.Matched, r.ContractHash, r.Stale, r.Unavailable, len(v.Lost), len(v.Changed)}
}

// A keyed baseline restored before judging gives exactly the verdict, and
// exactly the redacted evidence, of the clear baseline: identities, selector
// values and whole records that change type between reads included.
func TestKeyedBaselineSameVerdict(t *testing.T) {
	t.Parallel()
	policies := []Redaction{
		{RedactFields: []string{"ssn"}},
		{RedactFields: []string{"id"}},
		{RedactFields: []string{"patient_id", "ssn"}},
		{RedactFields: []string{"id", "patient_id", "ssn", "type"}},
		{KeepFields: []string{"type"}},
		{KeepFields: []string{"id"}},
	}
	contracts := []string{
		`{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "forbid_collateral_loss": false}`,
		`{"kind": "record_written", "match": {"patient_id": "1", "type": "T"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": "T"}}`,
		`{"kind": "record_written", "match": {"patient_id": "p1"}, "identity_field": "ssn", "count_new_only": true}`,
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "match": {"type": "T"}, "new_records": [{"patient_id": "1"}], "expected_count": 1, "forbid_collateral_loss": true}`,
		`{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "ssn", "value": "123-45-6789"}`,
	}
	ids := []any{json.Number("1"), json.Number("2"), json.Number("3"), "1", "2", "x", json.Number("1.0"), nil}
	patients := []any{"p1", "p2", json.Number("1"), "1", nil}
	ssns := []any{"123-45-6789", "987-65-4321", json.Number("5"), true, map[string]any{"a": "b"}, nil}
	types := []any{"T", "U", nil}
	rng := rand.New(rand.NewSource(7))
	pick := func(vals []any) any { return vals[rng.Intn(len(vals))] }
	record := func() Record {
		r := Record{}
		for f, vals := range map[string][]any{"id": ids, "patient_id": patients, "ssn": ssns, "type": types} {
			if rng.Intn(8) == 0 {
				continue // missing field: no identity, or no value
			}
			r[f] = pick(vals)
		}
		return r
	}
	copyRecord := func(r Record) Record {
		cp := Record{}
		maps.Copy(cp, r)
		return cp
	}
	bound := make([]*Contract, len(contracts))
	for i, src := range contracts {
		bound[i] = bindOne(t, src, nil)
	}
	const rounds = 3000
	kinds := map[string]int{}
	for round := range rounds {
		var before, after []Record
		for n := rng.Intn(5); n > 0; n-- {
			before = append(before, record())
		}
		for _, r := range before {
			switch rng.Intn(4) {
			case 0: // gone
			case 1: // changed in place
				cp := copyRecord(r)
				f := []string{"patient_id", "ssn", "type"}[rng.Intn(3)]
				cp[f] = pick(map[string][]any{"patient_id": patients, "ssn": ssns, "type": types}[f])
				after = append(after, cp)
			default:
				after = append(after, copyRecord(r))
			}
		}
		for n := rng.Intn(4); n > 0; n-- {
			after = append(after, record())
		}
		rng.Shuffle(len(after), func(i, j int) { after[i], after[j] = after[j], after[i] })
		p := policies[rng.Intn(len(policies))]
		c := bound[rng.Intn(len(bound))]

		keyed := make([]Record, len(before))
		for i, r := range before {
			keyed[i] = p.KeyBaseline(NewKeyer(testKey), r)
		}
		restored := p.NewRestorer(NewKeyer(testKey), []*Contract{c}, after).Restore(keyed)
		want := Judge(c, Snapshot{Reachable: true, Records: before}, Snapshot{Reachable: true, Records: after}, Options{})
		got := Judge(c, Snapshot{Reachable: true, Records: restored}, Snapshot{Reachable: true, Records: after}, Options{})
		kinds[strings.Join(want.Codes(), ",")]++
		if d := cmp.Diff(showVerdict(p, c, want), showVerdict(p, c, got), cmp.AllowUnexported(Reason{})); d != "" {
			t.Fatalf("round %d, policy %+v, contract %s\nbefore %v\nafter %v\nkeyed baseline changed the verdict (-clear +keyed):\n%s",
				round, p, contracts[indexOf(bound, c)], before, after, d)
		}
	}
	// The generator must reach the interesting verdicts.
	for _, code := range []string{ReasonCountExact, ReasonCountOver, ReasonCollateralLoss, ReasonSetScopeLoss, ReasonIdentityMissing, ReasonSetExact} {
		seen := false
		for k := range kinds {
			seen = seen || strings.Contains(k, code)
		}
		if !seen {
			t.Errorf("no round produced %s: %v", code, kinds)
		}
	}
}

func indexOf(cs []*Contract, c *Contract) int {
	for i := range cs {
		if cs[i] == c {
			return i
		}
	}
	return -1
}

func TestKeyBaselineHidesValues(t *testing.T) {
	t.Parallel()
	r := recs(t, `[{"id": "1", "patient_id": "p1", "ssn": "123-45-6789", "n": 42, "obj": {"k": "v-secret"}, "gone": null}]`)[0]
	tests := map[string]struct {
		policy Redaction
		clear  []string // values that must stay in clear
		hidden []string
	}{
		"deny":     {Redaction{RedactFields: []string{"ssn", "obj"}}, []string{`"p1"`, `"1"`}, []string{"123-45-6789", "v-secret"}},
		"allow":    {Redaction{KeepFields: []string{"id"}}, []string{`"1"`}, []string{"p1", "123-45-6789", `"n":42`, "v-secret"}},
		"inactive": {Redaction{}, []string{"123-45-6789", "v-secret"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := tc.policy.KeyBaseline(NewKeyer(testKey), r)
			raw, _ := json.Marshal(k)
			for _, s := range tc.clear {
				if !strings.Contains(string(raw), s) {
					t.Errorf("keyed record %s lost %s", raw, s)
				}
			}
			for _, s := range tc.hidden {
				if strings.Contains(string(raw), s) {
					t.Errorf("keyed record %s still holds %s", raw, s)
				}
			}
			if k["gone"] != nil {
				t.Errorf("a null became %v", k["gone"])
			}
			if tc.policy.Active() && fmt.Sprint(r["ssn"]) != "123-45-6789" {
				t.Errorf("KeyBaseline changed its input")
			}
		})
	}
	// A token from another key is never restored.
	p := Redaction{RedactFields: []string{"ssn"}}
	k := p.KeyBaseline(NewKeyer([]byte("another key........................")), r)
	back := p.NewRestorer(NewKeyer(testKey), nil, []Record{r}).Restore([]Record{k})
	if back[0]["ssn"] == "123-45-6789" {
		t.Errorf("a token keyed with another key was restored")
	}
	if KeyID(testKey) == KeyID([]byte("another key........................")) || strings.Contains(KeyID(testKey), hex.EncodeToString(testKey)) {
		t.Errorf("KeyID does not tell keys apart")
	}
}

func TestRedactKeyedText(t *testing.T) {
	t.Parallel()
	p := Redaction{RedactFields: []string{"ssn", "n", "note"}}
	keyed := p.KeyBaseline(NewKeyer(testKey), recs(t, `[{"id": 1, "ssn": "123-45-6789", "n": 12.5, "note": "Dr Who", "type": "ab"}]`)[0])
	tokens := p.Tokens([]Record{keyed})
	if len(tokens) != 3 {
		t.Fatalf("tokens %v, want the 3 hidden values", tokens)
	}
	tests := map[string]string{
		`locked: ssn=123-45-6789, retry`:      `locked: ssn=[REDACTED], retry`,
		`amount 12.50 (12.5) over`:            `amount [REDACTED] ([REDACTED]) over`,
		`seen by Dr Who.`:                     `seen by [REDACTED].`,
		`a0123-45-67890 is another word`:      `a0123-45-67890 is another word`,
		`type ab and id 1 are not hidden`:     `type ab and id 1 are not hidden`,
		`123-45-6789123-45-6789 glued values`: `123-45-6789123-45-6789 glued values`,
	}
	for in, want := range tests {
		if got := RedactKeyedText(NewKeyer(testKey), in, tokens); got != want {
			t.Errorf("RedactKeyedText(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	if got := RedactKeyedText(NewKeyer([]byte("another key........................")), `ssn 123-45-6789`, tokens); got != `ssn 123-45-6789` {
		t.Errorf("another key found %q", got)
	}
}

// BenchmarkKeyedBaseline measures what a redaction policy adds to one
// judgement of a 10,000-record read: restoring the keyed baseline.
func BenchmarkKeyedBaseline(b *testing.B) {
	p := Redaction{RedactFields: []string{"id", "ssn"}}
	c := bindOne(b, `{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}`, nil)
	var before, after []Record
	k := NewKeyer(testKey)
	for i := range 10000 {
		r := Record{"id": json.Number(fmt.Sprint(i)), "patient_id": fmt.Sprintf("p%d", i%100), "ssn": fmt.Sprintf("%03d-45-6789", i%1000)}
		before = append(before, p.KeyBaseline(k, r))
		after = append(after, r)
	}
	b.Run("first read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p.NewRestorer(NewKeyer(testKey), []*Contract{c}, after).Restore(before)
		}
	})
	b.Run("settling", func(b *testing.B) {
		k := NewKeyer(testKey)
		for i := 0; i < b.N; i++ {
			p.NewRestorer(k, []*Contract{c}, after).Restore(before)
		}
	})
}

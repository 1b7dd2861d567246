package judge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// invariantPart is what redaction must never change.
type invariantPart struct {
	Decision    Decision
	Class       Class
	Codes       []string
	Observed    *int
	Expected    *int
	Hash        string
	Stale       bool
	Unavailable bool
	Matched     int
}

func invariantOf(v Verdict) invariantPart {
	return invariantPart{v.Decision, v.Class, v.Codes(), v.ObservedCount, v.ExpectedCount, v.ContractHash, v.Stale, v.Unavailable, len(v.Matched)}
}

// Redaction masks values in matched records, observed/expected values and
// reason messages, and nothing else.
func TestRedactionApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		contract string
		before   string
		after    string
		opts     Options
		policy   Redaction
		secrets  []string // must not appear anywhere in the redacted evidence
		kept     []string // must still appear in the matched records
		codes    []string // sanity: the verdict under test
	}{
		{
			name:     "deny field_equals mismatch",
			contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "EXPECTED-SECRET"}`,
			before:   `[]`, after: `[{"id": 1, "note": "OBSERVED-SECRET", "type": "Triage"}]`,
			policy:  Redaction{RedactFields: []string{"note"}},
			secrets: []string{"EXPECTED-SECRET", "OBSERVED-SECRET"},
			kept:    []string{"Triage"},
			codes:   []string{"FIELD_MISMATCH"},
		},
		{
			name:     "deny field_equals equal",
			contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "BOTH-SECRET"}`,
			before:   `[]`, after: `[{"id": 1, "note": "BOTH-SECRET", "type": "Triage"}]`,
			policy:  Redaction{RedactFields: []string{"note"}},
			secrets: []string{"BOTH-SECRET"},
			kept:    []string{"Triage"},
			codes:   []string{"FIELD_EQUAL"},
		},
		{
			name:     "allow list field_equals",
			contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "EXPECTED-SECRET"}`,
			before:   `[]`, after: `[{"id": 1, "note": "OBSERVED-SECRET", "type": "TYPE-SECRET"}]`,
			policy:  Redaction{KeepFields: []string{"id"}},
			secrets: []string{"EXPECTED-SECRET", "OBSERVED-SECRET", "TYPE-SECRET"},
			codes:   []string{"FIELD_MISMATCH"},
		},
		{
			name:     "deny field_equals missing value",
			contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "EXPECTED-SECRET"}`,
			before:   `[]`, after: `[{"id": 1}]`,
			policy:  Redaction{RedactFields: []string{"note"}},
			secrets: []string{"EXPECTED-SECRET"},
			codes:   []string{"FIELD_MISMATCH"},
		},
		{
			name:     "deny collateral loss identity",
			contract: `{"kind": "record_written", "match": {"type": "Triage"}}`,
			before:   `[{"id": "ID-LOST-SECRET", "type": "Consult"}]`, after: `[{"id": "ID-NEW-SECRET", "type": "Triage"}]`,
			policy:  Redaction{RedactFields: []string{"id"}},
			secrets: []string{"ID-LOST-SECRET", "ID-NEW-SECRET"},
			kept:    []string{"Triage"},
			codes:   []string{"COLLATERAL_LOSS"},
		},
		{
			name:     "allow collateral loss identity",
			contract: `{"kind": "record_written", "match": {"type": "Triage"}}`,
			before:   `[{"id": "ID-LOST-SECRET", "type": "Consult"}]`, after: `[{"id": "ID-NEW-SECRET", "type": "Triage"}]`,
			policy:  Redaction{KeepFields: []string{"type"}},
			secrets: []string{"ID-LOST-SECRET", "ID-NEW-SECRET"},
			kept:    []string{"Triage"},
			codes:   []string{"COLLATERAL_LOSS"},
		},
		{
			name:     "deny collateral loss whole-record identity",
			contract: `{"kind": "record_written", "match": {"type": "Triage"}}`,
			before:   `[{"name": "NAME-SECRET", "type": "Consult"}]`, after: `[{"id": 2, "type": "Triage"}]`,
			policy:  Redaction{RedactFields: []string{"name"}},
			secrets: []string{"NAME-SECRET"},
			codes:   []string{"COLLATERAL_LOSS"},
		},
		{
			name:     "deny exact_new_set member and undeclared",
			contract: `{"kind": "exact_new_set", "new_records": [{"song_id": "SONG-SECRET"}]}`,
			before:   `[{"id": "SCOPE-ID-SECRET", "song_id": "S0"}]`, after: `[{"id": "UNDECLARED-ID-SECRET", "song_id": "OTHER-SONG-SECRET"}]`,
			policy:  Redaction{RedactFields: []string{"song_id", "id"}},
			secrets: []string{"SONG-SECRET", "UNDECLARED-ID-SECRET", "OTHER-SONG-SECRET", "SCOPE-ID-SECRET"},
			codes:   []string{"SET_MEMBER_MULTIPLICITY", "SET_UNDECLARED", "SET_SCOPE_LOSS"},
		},
		{
			name:     "allow exact_new_set member and undeclared",
			contract: `{"kind": "exact_new_set", "new_records": [{"song_id": "SONG-SECRET"}]}`,
			before:   `[{"id": "SCOPE-ID-SECRET", "song_id": "S0"}]`, after: `[{"id": "UNDECLARED-ID-SECRET", "song_id": "OTHER-SONG-SECRET", "kind": "song"}]`,
			policy:  Redaction{KeepFields: []string{"kind"}},
			secrets: []string{"SONG-SECRET", "UNDECLARED-ID-SECRET", "OTHER-SONG-SECRET", "SCOPE-ID-SECRET"},
			kept:    []string{"song"},
			codes:   []string{"SET_MEMBER_MULTIPLICITY", "SET_UNDECLARED", "SET_SCOPE_LOSS"},
		},
		{
			name:     "deny stale timestamp value",
			contract: `{"kind": "record_written", "match": {"type": "Triage"}, "forbid_collateral_loss": false}`,
			before:   `[]`, after: `[{"id": 1, "type": "Triage", "ts": "TS-SECRET"}]`,
			opts:    Options{Freshness: &Freshness{Field: "ts", WindowS: 60, Now: now}},
			policy:  Redaction{RedactFields: []string{"ts"}},
			secrets: []string{"TS-SECRET"},
			kept:    []string{"Triage"},
			codes:   []string{"STALE"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.contract, nil)
			v := Judge(c, read(t, tc.before), read(t, tc.after), tc.opts)
			if d := cmp.Diff(tc.codes, v.Codes()); d != "" {
				t.Fatalf("setup codes (-want +got):\n%s", d)
			}
			if err := tc.policy.Validate("evidence"); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			origMatched, _ := json.Marshal(v.Matched)
			r := tc.policy.Apply(v, c)
			if d := cmp.Diff(invariantOf(v), invariantOf(r)); d != "" {
				t.Errorf("redaction changed the verdict (-before +after):\n%s", d)
			}
			// Everything a verdict shows, as text.
			shown, err := json.Marshal(struct {
				Matched                      []Record
				Reasons                      []Reason
				ObservedValue, ExpectedValue *string
			}{r.Matched, r.Reasons, r.ObservedValue, r.ExpectedValue})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.secrets {
				if strings.Contains(string(shown), s) {
					t.Errorf("redacted evidence still contains %q: %s", s, shown)
				}
			}
			for _, s := range tc.kept {
				m, _ := json.Marshal(r.Matched)
				if !strings.Contains(string(m), s) {
					t.Errorf("redaction removed the kept value %q: %s", s, m)
				}
			}
			if c.Kind == FieldEquals {
				if v.ObservedValue != nil && (r.ObservedValue == nil || *r.ObservedValue != RedactedMarker) {
					t.Errorf("observed value %v, want %s", r.ObservedValue, RedactedMarker)
				}
				if r.ExpectedValue == nil || *r.ExpectedValue != RedactedMarker {
					t.Errorf("expected value %v, want %s", r.ExpectedValue, RedactedMarker)
				}
			}
			if after, _ := json.Marshal(v.Matched); string(after) != string(origMatched) {
				t.Errorf("Apply mutated the original verdict's records")
			}
		})
	}
}

func TestRedactionInactiveAndUnrelated(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "X"}`, nil)
	v := Judge(c, read(t, `[]`), read(t, `[{"id": 1, "note": "Y"}]`), Options{})
	r := Redaction{}.Apply(v, c)
	if d := cmp.Diff(summarize(v), summarize(r)); d != "" {
		t.Errorf("inactive policy changed the verdict (-want +got):\n%s", d)
	}
	if r.Reasons[0].Message != v.Reasons[0].Message {
		t.Errorf("inactive policy changed the message")
	}
	// Denying an unrelated field leaves the read-back visible.
	r = Redaction{RedactFields: []string{"ssn"}}.Apply(v, c)
	if d := cmp.Diff(summarize(v), summarize(r)); d != "" {
		t.Errorf("unrelated deny changed the verdict (-want +got):\n%s", d)
	}
	if !strings.Contains(r.Reasons[0].Message, `"Y"`) || r.Matched[0]["note"] != "Y" {
		t.Errorf("unrelated deny masked note: %+v %+v", r.Reasons, r.Matched)
	}
}

func TestRedactionValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy Redaction
		ok     bool
	}{
		{"none", Redaction{}, true},
		{"deny", Redaction{RedactFields: []string{"note", "ssn"}}, true},
		{"allow", Redaction{KeepFields: []string{"id"}}, true},
		{"both", Redaction{RedactFields: []string{"note"}, KeepFields: []string{"id"}}, false},
		{"empty deny name", Redaction{RedactFields: []string{""}}, false},
		{"empty allow name", Redaction{KeepFields: []string{"id", ""}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.policy.Validate("evidence")
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				var jerr *refusal.Error
				if !errors.As(err, &jerr) || !strings.HasPrefix(jerr.Path, "evidence") || jerr.Message == "" {
					t.Errorf("Validate error %#v, want an *refusal.Error naming evidence", err)
				}
			}
		})
	}
}

func TestRecordDigest(t *testing.T) {
	t.Parallel()
	rec := recs(t, `[{"name": "Zoë", "id": 1.0, "n": 1e3, "tags": ["<a>", true], "x": null}]`)[0]
	canonical := `{"id":1,"n":1000,"name":"Zo\u00eb","tags":["<a>",true],"x":null}`
	sum := sha256.Sum256([]byte(canonical))
	want := "sha256:" + hex.EncodeToString(sum[:])
	if d := cmp.Diff(want, RecordDigest(rec)); d != "" {
		t.Errorf("RecordDigest (-want +got):\n%s", d)
	}
}

// secretsContract uses distinctive values so that a task can be searched for them.
const secretsContract = `"match": {"patient_id": "PATIENT-SECRET", "type": "TRIAGE-SECRET"}, "idempotency_key": "IDEM-SECRET", "risk": "irreversible"`

var taskSecrets = []string{"PATIENT-SECRET", "TRIAGE-SECRET", "IDEM-SECRET", "NOTE-SECRET", "EXPECTED-SECRET", "ID-SECRET", "OTHER-SECRET"}

func TestNewTask(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	row := func(id string) string {
		return `{"id": "` + id + `", "patient_id": "PATIENT-SECRET", "type": "TRIAGE-SECRET", "key": "IDEM-SECRET", "note": "NOTE-SECRET"}`
	}
	rw := `{"kind": "record_written", ` + secretsContract + `}`
	fe := `{"kind": "field_equals", ` + secretsContract + `, "field": "note", "value": "EXPECTED-SECRET"}`
	ens := `{"kind": "exact_new_set", "match": {"type": "TRIAGE-SECRET"}, "new_records": [{"patient_id": "PATIENT-SECRET"}], "risk": "irreversible"}`
	tests := []struct {
		name     string
		contract string
		before   Snapshot
		after    Snapshot
		opts     Options
		kind     string
		action   string
		codes    []string
		digests  int
		values   *bool
	}{
		{"duplicates", rw, read(t, `[]`), read(t, "["+row("ID-SECRET-1")+","+row("ID-SECRET-2")+"]"), Options{},
			TaskEffectRefuted, ActionRemoveDuplicates, []string{"COUNT_OVER"}, 2, nil},
		{"missing write", rw, read(t, `[]`), read(t, `[]`), Options{},
			TaskEffectRefuted, ActionManualRepair, []string{"COUNT_UNDER"}, 0, nil},
		{"collateral loss", rw, read(t, `[{"id": "ID-SECRET-9", "patient_id": "OTHER-SECRET"}]`), read(t, "["+row("ID-SECRET-1")+"]"), Options{},
			TaskEffectRefuted, ActionManualRepair, []string{"COLLATERAL_LOSS"}, 1, nil},
		{"duplicates and loss", rw, read(t, `[{"id": "ID-SECRET-9", "patient_id": "OTHER-SECRET"}]`), read(t, "["+row("ID-SECRET-1")+","+row("ID-SECRET-2")+"]"), Options{},
			TaskEffectRefuted, ActionRemoveDuplicates, []string{"COUNT_OVER", "COLLATERAL_LOSS"}, 2, nil},
		{"unreachable", rw, read(t, `[]`), down, Options{},
			TaskEffectIndeterminate, ActionRestoreAccess, []string{"SOR_UNREACHABLE"}, 0, nil},
		{"baseline unreachable", rw, down, read(t, "["+row("ID-SECRET-1")+"]"), Options{},
			TaskEffectIndeterminate, ActionRestoreAccess, []string{"BASELINE_UNREACHABLE"}, 0, nil},
		{"stale", rw, read(t, `[]`), read(t, "["+row("ID-SECRET-1")+"]"), Options{Freshness: &Freshness{Field: "ts", WindowS: 60, Now: now}},
			TaskEffectIndeterminate, ActionRestoreAccess, []string{"STALE"}, 1, nil},
		{"read-back mismatch", fe, read(t, `[]`), read(t, "["+row("ID-SECRET-1")+"]"), Options{},
			TaskEffectRefuted, ActionManualRepair, []string{"FIELD_MISMATCH"}, 1, new(bool)},
		{"read-back ambiguous", fe, read(t, `[]`), read(t, "["+row("ID-SECRET-1")+","+row("ID-SECRET-2")+"]"), Options{},
			TaskEffectRefuted, ActionRemoveDuplicates, []string{"FIELD_AMBIGUOUS"}, 2, nil},
		{"read-back no match", fe, read(t, `[]`), read(t, `[]`), Options{},
			TaskEffectRefuted, ActionManualRepair, []string{"FIELD_NO_MATCH"}, 0, nil},
		{"set over", ens, read(t, `[]`), read(t, `[{"id": "ID-SECRET-1", "type": "TRIAGE-SECRET", "patient_id": "PATIENT-SECRET"}, {"id": "ID-SECRET-2", "type": "TRIAGE-SECRET", "patient_id": "OTHER-SECRET"}]`), Options{},
			TaskEffectRefuted, ActionRemoveDuplicates, []string{"SET_CARDINALITY", "SET_UNDECLARED"}, 2, nil},
		{"identity missing", ens, read(t, `[]`), read(t, `[{"type": "TRIAGE-SECRET", "patient_id": "PATIENT-SECRET"}]`), Options{},
			TaskEffectIndeterminate, ActionRestoreAccess, []string{"IDENTITY_MISSING"}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.contract, nil)
			v := Judge(c, tc.before, tc.after, tc.opts)
			if d := cmp.Diff(tc.codes, v.Codes()); d != "" {
				t.Fatalf("setup codes (-want +got):\n%s", d)
			}
			task := NewTask("sess-1", 0, "sqlite", c, &v, TaskOptions{})
			if task == nil {
				t.Fatal("no task for a non-confirmed irreversible effect")
			}
			type shape struct {
				Kind, Substrate, Hash, Action string
				EffectKind                    Kind
				Verdict                       Decision
				Codes                         []string
				Observed, Expected            *int
				Values                        *bool
				Digests                       int
			}
			codes := []string{}
			for _, r := range task.Reasons {
				codes = append(codes, r.Code)
				if r.Summary == "" {
					t.Errorf("reason %s has no summary", r.Code)
				}
			}
			got := shape{task.Kind, task.Substrate, task.ContractHash, task.SuggestedAction, task.EffectKind, task.Verdict, codes,
				task.Evidence.ObservedCount, task.Evidence.ExpectedCount, task.Evidence.ValuesMatch, len(task.Evidence.RecordDigests)}
			want := shape{tc.kind, "sqlite", c.Hash, tc.action, c.Kind, v.Decision, tc.codes, v.ObservedCount, v.ExpectedCount, tc.values, tc.digests}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("task (-want +got):\n%s", d)
			}
			for i, r := range v.Matched {
				if i < len(task.Evidence.RecordDigests) && task.Evidence.RecordDigests[i] != RecordDigest(r) {
					t.Errorf("digest %d = %s, want %s", i, task.Evidence.RecordDigests[i], RecordDigest(r))
				}
			}
			for _, dg := range task.Evidence.RecordDigests {
				if !strings.HasPrefix(dg, "sha256:") || len(dg) != len("sha256:")+64 {
					t.Errorf("digest %q is not sha256:<hex>", dg)
				}
			}
			if task.ID == "" {
				t.Errorf("task has no id")
			}
			if again := NewTask("sess-1", 0, "sqlite", c, &v, TaskOptions{}); again.ID != task.ID {
				t.Errorf("task id not stable: %s vs %s", task.ID, again.ID)
			}
			if other := NewTask("sess-1", 1, "sqlite", c, &v, TaskOptions{}); other.ID == task.ID {
				t.Errorf("task id does not depend on the index")
			}
			if other := NewTask("sess-2", 0, "sqlite", c, &v, TaskOptions{}); other.ID == task.ID {
				t.Errorf("task id does not depend on the scope")
			}
			js, err := json.Marshal(task)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range taskSecrets {
				if strings.Contains(string(js), s) {
					t.Errorf("task JSON carries the value %q: %s", s, js)
				}
			}
		})
	}
}

func TestNewTaskNone(t *testing.T) {
	t.Parallel()
	rev := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
	irr := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, nil)
	refutedV := Judge(rev, read(t, `[]`), read(t, `[]`), Options{})
	if task := NewTask("s", 0, "x", rev, &refutedV, TaskOptions{}); task != nil {
		t.Errorf("reversible refuted effect got a task: %+v", task)
	}
	indetV := Judge(rev, read(t, `[]`), down, Options{})
	if task := NewTask("s", 0, "x", rev, &indetV, TaskOptions{}); task != nil {
		t.Errorf("reversible indeterminate effect got a task: %+v", task)
	}
	confV := Judge(irr, read(t, `[]`), read(t, `[{"id": 1, "p": "1"}]`), Options{})
	if task := NewTask("s", 0, "x", irr, &confV, TaskOptions{}); task != nil {
		t.Errorf("confirmed irreversible effect got a task: %+v", task)
	}
	if task := NewTask("s", 0, "x", rev, &refutedV, TaskOptions{CompensationFailed: true, Deleted: nil}); task != nil {
		t.Errorf("reversible effect got a compensation_failed task")
	}
}

func TestFieldEqualsValuesMatchTrue(t *testing.T) {
	t.Parallel()
	// A demoted read-back whose values agree: values_match true.
	c := bindOne(t, `{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": "X", "risk": "irreversible"}`, nil)
	v := Judge(c, read(t, `[]`), read(t, `[{"id": 1, "note": "X"}]`), Options{})
	if !Demote(&v, Refuted, "PAGE_DOUBT", "doubt", Options{}) {
		t.Fatal("demote not applied")
	}
	task := NewTask("s", 0, "web", c, &v, TaskOptions{})
	if task == nil || task.Evidence.ValuesMatch == nil || !*task.Evidence.ValuesMatch {
		t.Fatalf("values_match = %v, want true", task)
	}
	if task.SuggestedAction != ActionManualRepair || task.Reasons[0].Code != "PAGE_DOUBT" || task.Reasons[0].Summary == "" {
		t.Errorf("task %+v", task)
	}
}

func TestCompensationFailedTask(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", `+secretsContract+`}`, nil)
	after := read(t, `[{"id": "ID-SECRET-1", "patient_id": "PATIENT-SECRET", "type": "TRIAGE-SECRET", "key": "IDEM-SECRET"},
		{"id": "ID-SECRET-2", "patient_id": "PATIENT-SECRET", "type": "TRIAGE-SECRET", "key": "IDEM-SECRET"},
		{"id": "ID-SECRET-3", "patient_id": "PATIENT-SECRET", "type": "TRIAGE-SECRET", "key": "IDEM-SECRET"}]`)
	v := Judge(c, read(t, `[]`), after, Options{})
	task := NewTask("sess", 3, "sqlite", c, &v, TaskOptions{CompensationFailed: true, Deleted: after.Records[2:]})
	if task == nil {
		t.Fatal("no task")
	}
	if task.Kind != TaskCompensationFailed || task.SuggestedAction != ActionManualRepair {
		t.Errorf("kind %s action %s, want compensation_failed MANUAL_REPAIR", task.Kind, task.SuggestedAction)
	}
	if d := cmp.Diff([]string{RecordDigest(after.Records[2])}, task.Evidence.DeletedDigests); d != "" {
		t.Errorf("deleted digests (-want +got):\n%s", d)
	}
	if plain := NewTask("sess", 3, "sqlite", c, &v, TaskOptions{}); plain.ID == task.ID {
		t.Errorf("compensation_failed task shares the id of the effect_refuted task")
	}
	js, _ := json.Marshal(task)
	for _, s := range taskSecrets {
		if strings.Contains(string(js), s) {
			t.Errorf("task JSON carries the value %q: %s", s, js)
		}
	}
}

func TestPlanCompensation(t *testing.T) {
	t.Parallel()
	const base = `"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"`
	ids := func(rs []Record) []string {
		out := []string{}
		for _, r := range rs {
			s, _ := Canon(r["id"])
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name     string
		contract string
		before   string
		after    string
		keep     []string
		del      []string
	}{
		{"numeric order 10 9 100 keep 9", "{" + base + "}", `[]`, `[{"id": 10, "p": "1"}, {"id": 9, "p": "1"}, {"id": 100, "p": "1"}]`,
			[]string{"9"}, []string{"10", "100"}},
		{"numeric strings", "{" + base + "}", `[]`, `[{"id": "10", "p": "1"}, {"id": "9", "p": "1"}]`,
			[]string{"9"}, []string{"10"}},
		{"down to expected_count, not one", "{" + base + `, "expected_count": 2}`, `[]`, `[{"id": 4, "p": "1"}, {"id": 3, "p": "1"}, {"id": 1, "p": "1"}, {"id": 2, "p": "1"}]`,
			[]string{"1", "2"}, []string{"3", "4"}},
		{"negative ids", "{" + base + "}", `[]`, `[{"id": -1, "p": "1"}, {"id": -10, "p": "1"}]`,
			[]string{"-10"}, []string{"-1"}},
		{"text ids", "{" + base + "}", `[]`, `[{"id": "b", "p": "1"}, {"id": "a", "p": "1"}]`,
			[]string{"a"}, []string{"b"}},
		{"custom identity_field", "{" + base + `, "identity_field": "uuid"}`, `[]`, `[{"uuid": 20, "id": 1, "p": "1"}, {"uuid": 3, "id": 2, "p": "1"}]`,
			[]string{"2"}, []string{"1"}},
		{"count_new_only duplicates only", "{" + base + `, "count_new_only": true}`, `[{"id": 1, "p": "1"}]`, `[{"id": 1, "p": "1"}, {"id": 7, "p": "1"}, {"id": 5, "p": "1"}]`,
			[]string{"5"}, []string{"7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.contract, nil)
			before := read(t, tc.before)
			after := read(t, tc.after)
			v := Judge(c, before, after, Options{})
			plan, err := PlanCompensation(c, &v)
			if err != nil {
				t.Fatalf("PlanCompensation: %v (codes %v)", err, v.Codes())
			}
			if d := cmp.Diff(struct{ Keep, Delete []string }{tc.keep, tc.del}, struct{ Keep, Delete []string }{ids(plan.Keep), ids(plan.Delete)}); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
			// Re-verification against the original baseline after the deletes.
			deleted := map[string]bool{}
			for _, r := range plan.Delete {
				deleted[RecordDigest(r)] = true
			}
			var rest []Record
			for _, r := range after.Records {
				if !deleted[RecordDigest(r)] {
					rest = append(rest, r)
				}
			}
			re := Judge(c, before, Snapshot{Reachable: true, Records: rest}, Options{})
			if re.Decision != Confirmed {
				t.Errorf("re-verification after compensation: %s %v", re.Decision, re.Codes())
			}
		})
	}
}

func TestPlanCompensationRefusals(t *testing.T) {
	t.Parallel()
	dup := `[{"id": 1, "p": "1"}, {"id": 2, "p": "1"}]`
	tests := []struct {
		name     string
		contract string
		before   string
		after    string
	}{
		{"collateral loss", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[{"id": 9, "p": "0"}]`, dup},
		{"reversible", `{"kind": "record_written", "match": {"p": "1"}}`, `[]`, dup},
		{"field_equals", `{"kind": "field_equals", "match": {"p": "1"}, "field": "id", "value": "1", "risk": "irreversible"}`, `[]`, dup},
		{"exact_new_set", `{"kind": "exact_new_set", "new_records": [{"p": "1"}], "risk": "irreversible"}`, `[]`, dup},
		{"missing identities", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[]`, `[{"p": "1", "n": 1}, {"p": "1", "n": 2}]`},
		{"missing one identity", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[]`, `[{"id": 1, "p": "1"}, {"p": "1", "n": 2}]`},
		{"shared identities", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[]`, `[{"id": 1, "p": "1", "n": 1}, {"id": "1", "p": "1", "n": 2}]`},
		{"under", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[]`, `[]`},
		{"confirmed", `{"kind": "record_written", "match": {"p": "1"}, "risk": "irreversible"}`, `[]`, `[{"id": 1, "p": "1"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.contract, nil)
			v := Judge(c, read(t, tc.before), read(t, tc.after), Options{})
			plan, err := PlanCompensation(c, &v)
			if err == nil {
				t.Fatalf("planned %+v for %v, want a refusal", plan, v.Codes())
			}
			if err.Error() == "" {
				t.Errorf("refusal without a reason")
			}
		})
	}
}

package judge

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// paramsOf lists the run parameters an effect refers to.
func paramsOf(e Effect) []string {
	var names []string
	add := func(v Value) {
		for _, n := range v.Params() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Match)) {
		add(e.Match[k])
	}
	if e.IdempotencyKey != nil {
		add(*e.IdempotencyKey)
	}
	if e.Value != nil {
		add(*e.Value)
	}
	for _, sel := range e.NewRecords {
		for _, k := range slices.Sorted(maps.Keys(sel)) {
			add(sel[k])
		}
	}
	return names
}

// checkEffect re-validates the docs/contracts.md §1 invariants of a loaded effect.
func checkEffect(t *testing.T, e Effect) {
	t.Helper()
	switch e.Kind {
	case RecordWritten, FieldEquals, ExactNewSet:
	default:
		t.Fatalf("loaded bad kind %q", e.Kind)
	}
	if e.ExpectedCount < 0 {
		t.Fatalf("negative expected_count %d", e.ExpectedCount)
	}
	if e.CountNewOnly && e.Kind != RecordWritten {
		t.Fatalf("count_new_only on %s", e.Kind)
	}
	if e.NewOnly && e.Kind != FieldEquals {
		t.Fatalf("new_only on %s", e.Kind)
	}
	checkAs := func(v Value) {
		switch As(v.As) {
		case "", AsDecimal, AsInteger, AsBoolean:
		default:
			t.Fatalf("loaded as %q", v.As)
		}
		if v.IsTemplate() {
			if err := param.CheckTemplate(v.Template); err != nil || v.Literal != "" || v.Param != "" {
				t.Fatalf("loaded template %q: %v", v.Template, err)
			}
		}
		if v.As != "" && !v.IsParam() && !v.IsTemplate() {
			if _, ok := normalise(As(v.As), v.Literal); !ok {
				t.Fatalf("loaded literal %q that does not parse as %s", v.Literal, v.As)
			}
		}
	}
	for _, v := range e.Match {
		checkAs(v)
	}
	for _, sel := range e.NewRecords {
		for _, v := range sel {
			checkAs(v)
		}
	}
	if e.Value != nil {
		checkAs(*e.Value)
	}
	if e.IdempotencyKey != nil {
		checkAs(*e.IdempotencyKey)
	}
	if len(e.NewRecords) > 0 && e.Kind != ExactNewSet {
		t.Fatalf("new_records on %s", e.Kind)
	}
	if e.Kind == ExactNewSet {
		if e.ExpectedCount != len(e.NewRecords) {
			t.Fatalf("exact_new_set expected_count %d != %d members", e.ExpectedCount, len(e.NewRecords))
		}
		if e.IdentityField == "" {
			t.Fatalf("exact_new_set with empty identity_field")
		}
	}
	for i, sel := range e.NewRecords {
		if len(sel) == 0 {
			t.Fatalf("empty member %d", i)
		}
	}
	if e.Kind == FieldEquals {
		if e.Field == "" || e.Value == nil {
			t.Fatalf("field_equals without field or value: %q %v", e.Field, e.Value)
		}
	} else if e.Field != "" || e.Value != nil {
		t.Fatalf("field/value on %s", e.Kind)
	}
	if e.Risk != Reversible && e.Risk != Irreversible {
		t.Fatalf("bad risk %q", e.Risk)
	}
	if math.IsNaN(e.TimeoutS) || e.TimeoutS < 0 || e.TimeoutS > 3600 {
		t.Fatalf("timeout_s %v out of 0..3600", e.TimeoutS)
	}
	if e.Match == nil {
		t.Fatalf("nil match")
	}
}

// effectJSON writes a loaded effect back as a JSON contract.
func effectJSON(e Effect) []byte {
	val := func(v Value) any {
		var m map[string]any
		switch {
		case v.IsParam():
			m = map[string]any{"param": v.Param}
		case v.IsTemplate():
			m = map[string]any{"template": v.Template}
		case v.As != "":
			m = map[string]any{"literal": v.Literal}
		default:
			return v.Literal
		}
		if v.As != "" {
			m["as"] = v.As
		}
		return m
	}
	sel := func(s Selector) map[string]any {
		m := map[string]any{}
		for k, v := range s {
			m[k] = val(v)
		}
		return m
	}
	m := map[string]any{
		"kind": string(e.Kind), "match": sel(e.Match), "expected_count": e.ExpectedCount,
		"count_new_only": e.CountNewOnly, "new_only": e.NewOnly, "key_field": e.KeyField, "identity_field": e.IdentityField,
		"forbid_collateral_loss": e.ForbidCollateralLoss, "risk": string(e.Risk), "timeout_s": e.TimeoutS, "probe": e.Probe,
	}
	if e.IdempotencyKey != nil {
		m["idempotency_key"] = val(*e.IdempotencyKey)
	}
	if e.Kind == FieldEquals {
		m["field"] = e.Field
		m["value"] = val(*e.Value)
	}
	if e.Kind == ExactNewSet {
		list := []any{}
		for _, s := range e.NewRecords {
			list = append(list, sel(s))
		}
		m["new_records"] = list
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzLoadEffects(f *testing.F) {
	for _, s := range []string{
		`[{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}]`,
		`[{"kind": "record_written", "match": {"patient_id": {"param": "pid"}}, "count_new_only": true, "idempotency_key": {"literal": "abc"}, "key_field": "idem", "timeout_s": 2.5, "probe": "x"}]`,
		`[{"kind": "field_equals", "match": {"name": "Zoë"}, "field": "note", "value": {"param": "note"}, "risk": "irreversible"}]`,
		`[{"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2}]`,
		`[{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "identity_field": "uuid"}]`,
		`[{"kind": "record_written", "match": {"id": 1}}]`,
		`[{"kind": "bogus"}]`,
		"- kind: record_written\n  match:\n    id: \"1\"\n  expected_count: 0\n",
		"- kind: exact_new_set\n  new_records:\n    - {a: {param: x}}\n",
		"- kind: field_equals\n  field: f\n  value: {literal: v}\n  forbid_collateral_loss: false\n",
		`[{"kind": "field_equals", "match": {"n": {"literal": "2.0", "as": "integer"}}, "field": "amount", "value": {"param": "amount", "as": "decimal"}, "new_only": true}]`,
		`[{"kind": "record_written", "match": {"b": {"literal": "TRUE", "as": "boolean"}, "t": {"literal": "x", "as": "text"}}, "idempotency_key": {"param": "k", "as": "integer"}}]`,
		`[{"kind": "exact_new_set", "new_records": [{"n": {"literal": "1e3", "as": "decimal"}}], "expected_count": 1}]`,
		`[{"kind": "record_written", "match": {"n": {"literal": "1,5", "as": "decimal"}}}]`,
		`[{"kind": "record_written", "new_only": true}]`,
		`[{"kind": "field_equals", "match": {"s": {"template": "Patient/{patient_id}"}}, "field": "f", "value": {"template": "{a}-{b}", "as": "text"}}]`,
		`[{"kind": "record_written", "match": {"n": {"template": "{n}", "as": "integer"}}, "idempotency_key": {"template": "k{"}}]`,
		"- kind: exact_new_set\n  new_records:\n    - {ref: {template: \"Encounter/{e}\"}}\n  expected_count: 1\n",
		"- &a {kind: record_written}\n- *a\n",
		"",
		// Nesting at and past the limit, JSON and YAML (flow and block).
		`[{"kind": "record_written", "match": {"a": ` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `}}]`,
		`[{"kind": "record_written", "match": {"a": ` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}}]`,
		strings.Repeat("[", 5000),
		"- " + strings.Repeat("[", 70) + "x" + strings.Repeat("]", 70) + "\n",
		strings.Repeat("- ", 70) + "x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		effs, err := ParseEffects(data, "effects")
		if err != nil {
			var jerr *refusal.Error
			if !errors.As(err, &jerr) || jerr.Code != CodeInvalidContract || jerr.Message == "" || !strings.HasPrefix(jerr.Path, "effects") {
				t.Fatalf("refusal %#v is not an INVALID_CONTRACT *refusal.Error under effects", err)
			}
			return
		}
		for i, e := range effs {
			checkEffect(t, e)
			names := paramsOf(e)
			params := map[string]string{}
			for _, n := range names {
				params[n] = "bound-" + n
			}
			// A typed parameter gets text of its type ("1" parses as all).
			typed := typedParams(e)
			for n := range typed {
				params[n] = "1"
				if typed[n] == AsBoolean {
					params[n] = "true"
				}
			}
			c, err := Bind(e, params, "effects[0]")
			if err != nil && typedTemplate(e) {
				// A typed template's expansion ("x1") need not parse.
				var jerr *refusal.Error
				if !errors.As(err, &jerr) || jerr.Code != CodeUnboundParam || !strings.HasSuffix(jerr.Path, ".template") {
					t.Fatalf("effect %d: typed template refused as %#v", i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("effect %d: Bind with every referenced param: %v", i, err)
			}
			if c.Hash != HashContract(c) || !strings.HasPrefix(c.Hash, "sha256:") || len(c.Hash) != 71 {
				t.Fatalf("effect %d: hash %q unstable or malformed", i, c.Hash)
			}
			c2, err := Bind(e, params, "effects[0]")
			if err != nil || c2.Hash != c.Hash {
				t.Fatalf("effect %d: rebinding changed the hash: %v", i, err)
			}
			var in any
			if err := json.Unmarshal([]byte(HashInput(c)), &in); err != nil {
				t.Fatalf("effect %d: hash input is not JSON: %v", i, err)
			}
			if len(names) > 0 {
				_, err := Bind(e, nil, "effects[0]")
				var jerr *refusal.Error
				if !errors.As(err, &jerr) || jerr.Code != CodeUnboundParam {
					t.Fatalf("effect %d: Bind without params: %v, want UNBOUND_PARAM", i, err)
				}
				for _, n := range names {
					if !strings.Contains(jerr.Message, n) {
						t.Fatalf("effect %d: UNBOUND_PARAM message %q does not name %q", i, jerr.Message, n)
					}
				}
			}
			// Writing the effect back as JSON loads the same effect.
			back, err := ParseEffects(append(append([]byte("["), effectJSON(e)...), ']'), "effects")
			if err != nil {
				t.Fatalf("effect %d: reloading %s: %v", i, effectJSON(e), err)
			}
			if d := cmp.Diff(e, back[0]); d != "" {
				t.Fatalf("effect %d: round trip differs (-loaded +reloaded):\n%s", i, d)
			}
		}
	})
}

// fuzzSnapshot decodes a JSON list of records; non-objects are dropped.
func fuzzSnapshot(data []byte, reachable bool) (Snapshot, bool) {
	if !reachable {
		return Snapshot{Reachable: false}, true
	}
	tree, err := DecodeJSON(data)
	if err != nil {
		return Snapshot{}, false
	}
	list, ok := tree.([]any)
	if !ok {
		return Snapshot{}, false
	}
	s := Snapshot{Reachable: true, Records: []Record{}}
	for _, r := range list {
		if m, ok := r.(map[string]any); ok {
			s.Records = append(s.Records, m)
		}
	}
	return s, true
}

// typedParams lists the run parameters an effect compares under a type;
// a parameter used both typed and as text keeps the last type seen.
// typedTemplate reports whether a value of e is a template with `as`.
func typedTemplate(e Effect) bool {
	found := false
	each := func(v Value) { found = found || (v.IsTemplate() && v.As != "") }
	for _, v := range e.Match {
		each(v)
	}
	for _, sel := range e.NewRecords {
		for _, v := range sel {
			each(v)
		}
	}
	for _, v := range []*Value{e.Value, e.IdempotencyKey} {
		if v != nil {
			each(*v)
		}
	}
	return found
}

func typedParams(e Effect) map[string]As {
	out := map[string]As{}
	add := func(v Value) {
		if v.IsParam() && v.As != "" {
			out[v.Param] = As(v.As)
		}
	}
	for _, v := range e.Match {
		add(v)
	}
	for _, sel := range e.NewRecords {
		for _, v := range sel {
			add(v)
		}
	}
	if e.Value != nil {
		add(*e.Value)
	}
	if e.IdempotencyKey != nil {
		add(*e.IdempotencyKey)
	}
	return out
}

// selectorHolds is an independent restatement of "a selector matches a
// record when every pair matches" (docs/contracts.md §2, §2a): text compares
// canonical text, an object or array matches nothing, and a decimal or
// integer pair is checked with math/big where the value is small enough.
func selectorHolds(r Record, sel []Pair) bool {
	for _, p := range sel {
		raw := r[p.Field]
		switch raw.(type) {
		case map[string]any, []any, nil:
			return false
		}
		text, has := Canon(raw)
		if !has {
			return false
		}
		switch p.As {
		case "":
			if text != p.Value {
				return false
			}
		case AsDecimal, AsInteger:
			if _, isBool := raw.(bool); isBool {
				return false
			}
			got, want := ratOfAny(text), ratOfAny(p.Value)
			if got == nil || want == nil {
				// Too large for big.Rat here: the judge's own rule.
				if g, ok := typedText(p.As, kindOfTest(raw), text); !ok || g != p.Value {
					return false
				}
				continue
			}
			if got.Cmp(want) != 0 || (p.As == AsInteger && !got.IsInt()) {
				return false
			}
		case AsBoolean:
			switch x := raw.(type) {
			case bool:
				if text != p.Value {
					return false
				}
			case string:
				if strings.ToLower(x) != p.Value || (p.Value != "true" && p.Value != "false") {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// ratOfAny is ratOf, or nil.
func ratOfAny(s string) *big.Rat {
	r, ok := ratOf(s)
	if !ok {
		return nil
	}
	return r
}

func kindOfTest(v any) compact.ValueKind {
	k, _ := kindOf(v)
	return k
}

// fuzzCensus is a census read for the fuzz test: the identities in data
// (records without an "id" are kept, making the census unusable).
// kernelCodes checks that the reasons appended after a kind's own
// (OTHER_WRITE, UNEXPLAINED_CHANGE, TRANSIENT_WRITE) come last in that
// order, and returns the kind's own.
func kernelCodes(t *testing.T, codes []string) []string {
	t.Helper()
	tail := []string{ReasonOtherWrite, ReasonUnexplainedChange, ReasonTransientWrite}
	end := len(codes)
	for k := len(tail) - 1; k >= 0 && end > 0; k-- {
		if codes[end-1] == tail[k] {
			end--
		}
	}
	for _, code := range codes[:end] {
		if slices.Contains(tail, code) {
			t.Fatalf("reasons %v: %s before the kind's own reasons", codes, code)
		}
	}
	return codes[:end]
}

// fuzzWriteSet reads a JSON list of changes ({op, table, before, after})
// as a complete write set; nil for no data or data that is not such a list.
func fuzzWriteSet(data []byte) *WriteSet {
	if len(data) == 0 {
		return nil
	}
	tree, err := DecodeJSON(data)
	list, ok := tree.([]any)
	if err != nil || !ok {
		return nil
	}
	ws := &WriteSet{Reachable: true, Complete: true}
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		op, _ := m["op"].(string)
		table, _ := m["table"].(string)
		ch := Change{Op: op, Table: table}
		ch.Before, _ = m["before"].(map[string]any)
		ch.After, _ = m["after"].(map[string]any)
		ws.Changes = append(ws.Changes, ch)
	}
	return ws
}

func fuzzCensus(data []byte) Snapshot {
	s, ok := fuzzSnapshot(data, true)
	if !ok {
		return Snapshot{Reachable: false, Reason: "not a list"}
	}
	return s
}

var fuzzNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func FuzzJudge(f *testing.F) {
	seeds := []struct {
		contract, before, after  string
		beforeUp, afterUp, fresh bool
	}{
		{`{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}`, `[]`,
			`[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}, {"id": 2, "patient_id": "p1", "type": "Triage", "note": "N"}]`, true, true, false},
		{`{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}`, `[{"id": 1, "patient_id": "p1", "type": "Consult", "note": "URGENT"}]`,
			`[{"id": 2, "patient_id": "p1", "type": "Triage", "note": "N"}]`, true, true, false},
		{`{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}, "count_new_only": true}`, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}]`,
			`[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}]`, true, true, false},
		{`{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}, "idempotency_key": "abc"}`, `[]`,
			`[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N", "key": "abc"}]`, true, true, false},
		{`{"kind": "record_written", "match": {"active": "true"}}`, `[]`, `[{"id": 1, "active": true}]`, true, true, false},
		{`{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}`, `[]`,
			`[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N", "ts": "2026-01-01T11:58:59Z"}]`, true, true, true},
		{`{"kind": "record_written", "match": {"patient_id": {"param": "pid"}}}`, `[]`, `[]`, false, false, false},
		{`{"kind": "field_equals", "match": {"patient_id": "p1", "type": "Triage"}, "field": "note", "value": ""}`, `[]`,
			`[{"id": 1, "patient_id": "p1", "type": "Triage"}]`, true, true, false},
		{`{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "note", "value": "Follow-up"}`, `[]`,
			`[{"id": 1, "patient_id": "p1", "note": "Follow-up", "ts": 1767268790}]`, false, true, true},
		{`{"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2}`,
			`[{"id": 0, "user_id": "7", "song_id": "1"}]`, `[{"id": 0, "user_id": "7", "song_id": "1"}, {"id": 1, "user_id": "32", "song_id": "199"}, {"id": 2, "user_id": "32", "song_id": "9"}]`, true, true, false},
		{`{"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2}`,
			`[{"id": 99, "user_id": "32", "song_id": "77"}]`, `[{"id": 1, "user_id": "32", "song_id": "199"}, {"id": 2, "user_id": "32", "song_id": "9"}]`, true, true, false},
		{`{"kind": "exact_new_set", "match": {"u": "1"}, "new_records": [{"s": "x"}, {"s": "x"}], "expected_count": 2}`,
			`[{"u": "1"}]`, `[{"id": 1, "u": "1", "s": "x"}]`, true, true, false},
	}
	for _, s := range seeds {
		f.Add([]byte(s.contract), []byte(s.before), []byte(s.after), s.beforeUp, s.afterUp, s.fresh, []byte(nil), []byte(nil), false, []byte(nil))
	}
	// Census seeds: a re-assigned record, an honest one, a loss outside
	// the subject, an unusable census, typed values.
	const rwNew = `{"kind": "record_written", "match": {"a": "p1"}, "count_new_only": true}`
	for _, s := range []struct{ contract, before, after, bc, ac string }{
		{rwNew, `[]`, `[{"id": 5, "a": "p1"}]`, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 6}]`},
		{rwNew, `[]`, `[{"id": 7, "a": "p1"}]`, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 6}, {"id": 7}]`},
		{rwNew, `[]`, `[{"id": 7, "a": "p1"}]`, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 7}]`},
		{rwNew, `[]`, `[{"id": 7, "a": "p1"}]`, `[{"id": 5}, {"x": 6}]`, `[{"id": 5}]`},
		{`{"kind": "exact_new_set", "match": {"a": "p1"}, "new_records": [{"a": "p1"}], "expected_count": 1}`, `[]`, `[{"id": 5, "a": "p1"}]`, `[{"id": 5}]`, `[{"id": 5}]`},
		{`{"kind": "field_equals", "match": {"a": "p1"}, "field": "v", "value": {"literal": "120.0", "as": "decimal"}, "new_only": true}`,
			`[{"id": 1, "a": "p1", "v": 118}]`, `[{"id": 1, "a": "p1", "v": 118}, {"id": 2, "a": "p1", "v": "120"}]`, `[{"id": 1}]`, `[{"id": 1}, {"id": 2}]`},
		// Changed existing records on the baseline alone: re-pointed,
		// keyed into scope, a set member re-pointed.
		{rwNew, `[{"id": 5, "a": "p2"}]`, `[{"id": 5, "a": "p1"}, {"id": 7, "a": "p1"}]`, ``, ``},
		{`{"kind": "record_written", "match": {"a": "p1"}, "count_new_only": true, "idempotency_key": "k", "key_field": "n"}`,
			`[{"id": 5, "a": "p1", "n": "j"}]`, `[{"id": 5, "a": "p1", "n": "k"}]`, ``, ``},
		{`{"kind": "exact_new_set", "match": {"a": "p1"}, "new_records": [{"a": "p1"}], "expected_count": 1}`, `[{"id": 5, "a": "p2"}]`, `[{"id": 5, "a": "p1"}]`, ``, ``},
		{`{"kind": "record_written", "match": {"n": {"literal": "24", "as": "integer"}, "b": {"literal": "true", "as": "boolean"}}}`,
			`[]`, `[{"id": 1, "n": "24.0", "b": "TRUE"}, {"id": 2, "n": {"v": 24}, "b": true}]`, ``, ``},
	} {
		f.Add([]byte(s.contract), []byte(s.before), []byte(s.after), true, true, false, []byte(s.bc), []byte(s.ac), s.bc != "", []byte(nil))
	}
	// Write-set seeds: an honest insert, a re-pointing, a deletion, an
	// other write under forbid_other_writes, a transient record.
	for _, s := range []struct{ contract, after, changes string }{
		{rwNew, `[{"id": 7, "a": "p1"}]`, `[{"op": "insert", "table": "t", "after": {"id": 7, "a": "p1"}}]`},
		{rwNew, `[{"id": 5, "a": "p1"}]`, `[{"op": "update", "table": "t", "before": {"id": 5, "a": "p2"}, "after": {"id": 5, "a": "p1"}}]`},
		{rwNew, `[]`, `[{"op": "delete", "table": "t", "before": {"id": 3, "a": "p3"}}]`},
		{`{"kind": "record_written", "match": {"a": "p1"}, "count_new_only": true, "forbid_other_writes": true}`, `[{"id": 7, "a": "p1"}]`,
			`[{"op": "insert", "table": "t", "after": {"id": 7, "a": "p1"}}, {"op": "update", "table": "t", "before": {"id": 4, "v": 1}, "after": {"id": 4, "v": 2}}]`},
		{`{"kind": "exact_new_set", "match": {"a": "p1"}, "new_records": [{"a": "p1"}], "expected_count": 1}`, `[{"id": 7, "a": "p1"}]`,
			`[{"op": "insert", "table": "t", "after": {"id": 8, "a": "p1"}}, {"op": "delete", "table": "t", "before": {"id": 8, "a": "p1"}}, {"op": "insert", "table": "t", "after": {"id": 7, "a": "p1"}}]`},
	} {
		f.Add([]byte(s.contract), []byte(`[]`), []byte(s.after), true, true, false, []byte(nil), []byte(nil), false, []byte(s.changes))
	}
	f.Fuzz(func(t *testing.T, contract, beforeJS, afterJS []byte, beforeUp, afterUp, fresh bool, beforeCensus, afterCensus []byte, withCensus bool, changesJS []byte) {
		tree, err := DecodeJSON(contract)
		if err != nil {
			return
		}
		e, err := LoadEffect(tree, "effects[0]")
		if err != nil {
			return
		}
		params := map[string]string{}
		for _, n := range paramsOf(e) {
			params[n] = "p1"
		}
		for n, as := range typedParams(e) {
			params[n] = map[As]string{AsDecimal: "1.50", AsInteger: "1", AsBoolean: "True"}[as]
		}
		c, err := Bind(e, params, "effects[0]")
		if err != nil && typedTemplate(e) {
			return // a typed template's expansion need not parse
		}
		if err != nil {
			t.Fatalf("Bind: %v", err)
		}
		before, ok := fuzzSnapshot(beforeJS, beforeUp)
		if !ok {
			return
		}
		after, ok := fuzzSnapshot(afterJS, afterUp)
		if !ok {
			return
		}
		opts := Options{}
		if fresh {
			opts.Freshness = &Freshness{Field: "ts", WindowS: 60, Now: fuzzNow}
		}
		if withCensus {
			opts.Census = &Census{Before: fuzzCensus(beforeCensus), After: fuzzCensus(afterCensus)}
		}
		opts.WriteSet = fuzzWriteSet(changesJS)
		writeSetUsed := usesWriteSet(c, opts)
		censusUsed := withCensus && NeedsBaseline(c) && !writeSetUsed
		v := Judge(c, before, after, opts)
		// The compact path gives the same verdict, from maps and from the
		// fast decoder.
		checkBatchAgrees(t, "BatchOf", v, JudgeBatch(c, batchOf(before), batchOf(after), opts))
		if bb, ok := scanSnapshot(beforeJS, beforeUp); ok {
			if ab, ok := scanSnapshot(afterJS, afterUp); ok {
				checkBatchAgrees(t, "compact.Scanner", v, JudgeBatch(c, bb, ab, opts))
			}
		}
		// And from reads streamed one record at a time, each kept only
		// as far as the contract reads it.
		projected := func(s Snapshot, p *Projection) BatchSnapshot {
			if !s.Reachable {
				return BatchSnapshot{}
			}
			rs := NewRecordStream("records", len(s.Records))
			rs.Project(p)
			for _, r := range s.Records {
				if err := rs.Add([]byte(CanonicalJSON(r))); err != nil {
					t.Fatalf("a decoded record does not stream: %v", err)
				}
			}
			return BatchSnapshot{Reachable: true, Batch: rs.Batch()}
		}
		group := []*Contract{c}
		checkBatchAgrees(t, "Projection", v, JudgeBatch(c, projected(before, ProjectBaseline(group)), projected(after, ProjectAfter(group)), opts))
		// And from a baseline stored as an index and read back.
		if before.Reachable {
			recs := make([]string, len(before.Records))
			for i, r := range before.Records {
				recs[i] = CanonicalJSON(r)
			}
			ib, _ := indexRead(t, recs, ProjectBaseline(group))
			checkBatchAgrees(t, "Index", v, JudgeBatch(c, BatchSnapshot{Reachable: true, Batch: ib}, projected(after, ProjectAfter(group)), opts))
		}

		// Invariant: class is confirmed iff the verdict is CONFIRMED, and is what Classify says.
		if (v.Class == ClassConfirmed) != (v.Decision == Confirmed) {
			t.Fatalf("class %s with decision %s", v.Class, v.Decision)
		}
		if v.Class != Classify(&v, Options{}) {
			t.Fatalf("class %s, Classify says %s", v.Class, Classify(&v, Options{}))
		}
		// Invariant: every verdict explains itself.
		if len(v.Reasons) == 0 {
			t.Fatalf("%s without reasons", v.Decision)
		}
		if v.ContractHash != c.Hash {
			t.Fatalf("contract hash %s, want %s", v.ContractHash, c.Hash)
		}
		// Invariant: after unreachable -> INDETERMINATE SOR_UNREACHABLE, unavailable.
		if !afterUp {
			if v.Decision != Indeterminate || v.Class != ClassUnavailable || v.Codes()[0] != ReasonSORUnreachable {
				t.Fatalf("after unreachable: %s %s %v", v.Decision, v.Class, v.Codes())
			}
		}
		// Invariant: a needed baseline unreachable -> INDETERMINATE BASELINE_UNREACHABLE.
		if afterUp && !beforeUp && NeedsBaseline(c) {
			if v.Decision != Indeterminate || v.Codes()[0] != ReasonBaselineUnreachable {
				t.Fatalf("needed baseline unreachable: %s %v", v.Decision, v.Codes())
			}
		}
		// Invariant: INDETERMINATE carries no counts; other verdicts do.
		if v.Decision == Indeterminate {
			if v.ObservedCount != nil || v.ExpectedCount != nil {
				t.Fatalf("INDETERMINATE with counts %v/%v", v.ObservedCount, v.ExpectedCount)
			}
		} else {
			if v.ObservedCount == nil || v.ExpectedCount == nil || *v.ObservedCount != len(v.Matched) {
				t.Fatalf("%s counts %v/%v with %d matched", v.Decision, v.ObservedCount, v.ExpectedCount, len(v.Matched))
			}
			want := c.ExpectedCount
			if c.Kind == FieldEquals {
				want = 1
			}
			if *v.ExpectedCount != want {
				t.Fatalf("expected_count %d, want %d", *v.ExpectedCount, want)
			}
		}
		changed := slices.Contains(v.Codes(), ReasonExistingRecordChanged)
		if changed && !claimsNewness(c) {
			t.Fatalf("%s on a contract that claims no newness", ReasonExistingRecordChanged)
		}
		// Invariant: the structured lists back their reasons, complete.
		if changed != (len(v.Changed) > 0) || v.HasLoss() != (len(v.Lost) > 0) {
			t.Fatalf("codes %v with %d changed and %d lost identities", v.Codes(), len(v.Changed), len(v.Lost))
		}
		if v.Decision == Refuted {
			if v.Class != ClassRefuted && v.Class != ClassConflicting {
				t.Fatalf("REFUTED classed %s", v.Class)
			}
			unexplained := slices.Contains(v.Codes(), ReasonUnexplainedChange)
			if unexplained && ((!censusUsed && !writeSetUsed) || len(v.Unexplained) == 0) {
				t.Fatalf("%s without a census or identities: %v", ReasonUnexplainedChange, v.Unexplained)
			}
			other := slices.Contains(v.Codes(), ReasonOtherWrite)
			if other && (!c.ForbidOtherWrites || opts.WriteSet == nil) {
				t.Fatalf("%s without forbid_other_writes and a write set", ReasonOtherWrite)
			}
			if (v.Class == ClassConflicting) != (*v.ObservedCount > 0 || v.HasLoss() || changed || unexplained || other) {
				t.Fatalf("REFUTED observed %d loss %v changed %v classed %s", *v.ObservedCount, v.HasLoss(), changed, v.Class)
			}
		}
		// Invariant: an unusable census that the contract reads is
		// INDETERMINATE CENSUS_UNUSABLE once both reads are there.
		if censusUsed && afterUp && beforeUp {
			okB, _ := CensusUsable(c, opts.Census.Before)
			okA, _ := CensusUsable(c, opts.Census.After)
			if unusable := !okB || !okA; unusable != (v.Codes()[0] == ReasonCensusUnusable) {
				t.Fatalf("census usable %v/%v, verdict %s %v", okB, okA, v.Decision, v.Codes())
			}
			if !okB || !okA {
				if v.Decision != Indeterminate || v.Class != ClassIndeterminate {
					t.Fatalf("unusable census: %s %s", v.Decision, v.Class)
				}
			}
		}
		if v.Stale && (v.Decision != Indeterminate || v.Class != ClassStale || len(v.Reasons) != 1 || v.Reasons[0].Code != ReasonStale) {
			t.Fatalf("stale verdict %s %s %v", v.Decision, v.Class, v.Codes())
		}
		if v.Stale && !fresh {
			t.Fatalf("stale without a freshness setting")
		}

		// Per-kind invariants.
		switch c.Kind {
		case RecordWritten:
			if v.Decision == Confirmed {
				if len(v.Matched) != c.ExpectedCount || v.HasLoss() || !slices.Equal(kernelCodes(t, v.Codes()), []string{ReasonCountExact}) {
					t.Fatalf("CONFIRMED record_written: %d matched, expected %d, codes %v", len(v.Matched), c.ExpectedCount, v.Codes())
				}
			}
			if v.Decision == Refuted {
				n, x := *v.ObservedCount, *v.ExpectedCount
				codes := kernelCodes(t, v.Codes())
				var want []string
				if n > x {
					want = append(want, ReasonCountOver)
				} else if n < x {
					want = append(want, ReasonCountUnder)
				}
				if changed {
					want = append(want, ReasonExistingRecordChanged)
				}
				if slices.Contains(codes, ReasonCollateralLoss) {
					want = append(want, ReasonCollateralLoss)
				}
				if !slices.Equal(codes, want) || len(v.Codes()) == 0 {
					t.Fatalf("REFUTED record_written observed %d expected %d codes %v, want %v", n, x, codes, want)
				}
				if !c.ForbidCollateralLoss && v.HasLoss() {
					t.Fatalf("collateral loss with forbid_collateral_loss false")
				}
			}
			if v.Decision != Indeterminate || v.Stale {
				for _, r := range v.Matched {
					if !selectorHolds(r, c.Match) {
						t.Fatalf("matched record %v does not satisfy the selector %v", r, c.Match)
					}
					if c.IdempotencyKey != nil && !selectorHolds(r, []Pair{keyPair(c)}) {
						t.Fatalf("matched record %v fails the idempotency key", r)
					}
				}
			}
		case FieldEquals:
			if v.Decision == Confirmed {
				if len(v.Matched) != 1 {
					t.Fatalf("CONFIRMED field_equals with %d matched", len(v.Matched))
				}
				if !selectorHolds(v.Matched[0], []Pair{{Field: c.Field, Value: *c.Value, As: c.ValueAs}}) {
					t.Fatalf("CONFIRMED field_equals: field %q is %v, want %q as %q", c.Field, v.Matched[0][c.Field], *c.Value, c.ValueAs)
				}
			}
			if v.Decision != Indeterminate || v.Stale {
				for _, r := range v.Matched {
					if !selectorHolds(r, c.Match) {
						t.Fatalf("read-back record %v does not satisfy the selector %v", r, c.Match)
					}
				}
			}
			if v.ExpectedValue == nil || *v.ExpectedValue != *c.Value {
				t.Fatalf("field_equals expected_value %v, want %q", v.ExpectedValue, *c.Value)
			}
		case ExactNewSet:
			if v.Decision == Confirmed {
				if len(v.Matched) != c.ExpectedCount || !slices.Equal(kernelCodes(t, v.Codes()), []string{ReasonSetExact}) {
					t.Fatalf("CONFIRMED exact_new_set: added %d, expected %d, codes %v", len(v.Matched), c.ExpectedCount, v.Codes())
				}
				baseIDs := map[string]bool{}
				for _, r := range before.Records {
					id, has := Canon(r[c.IdentityField])
					if !has {
						t.Fatalf("CONFIRMED exact_new_set with a baseline record lacking %q", c.IdentityField)
					}
					if !censusUsed && !writeSetUsed {
						baseIDs[id] = true
					}
				}
				if censusUsed {
					// Newness is judged against the before census.
					for _, r := range opts.Census.Before.Records {
						id, _ := Canon(r[c.IdentityField])
						baseIDs[id] = true
					}
				}
				for _, r := range v.Matched {
					id, has := Canon(r[c.IdentityField])
					if !has || baseIDs[id] {
						t.Fatalf("CONFIRMED exact_new_set counted %v as added", r)
					}
					if !selectorHolds(r, c.Match) {
						t.Fatalf("added record %v is out of scope", r)
					}
				}
			}
			if v.Decision == Refuted {
				order := []string{ReasonSetCardinality, ReasonSetMultiplicity, ReasonSetUndeclared, ReasonExistingRecordChanged, ReasonSetScopeLoss}
				last := -1
				for _, code := range kernelCodes(t, v.Codes()) {
					i := slices.Index(order, code)
					if i <= last {
						t.Fatalf("exact_new_set reasons %v out of order", v.Codes())
					}
					last = i
				}
				if (len(v.Matched) != c.ExpectedCount) != slices.Contains(v.Codes(), ReasonSetCardinality) {
					t.Fatalf("added %d expected %d codes %v", len(v.Matched), c.ExpectedCount, v.Codes())
				}
			}
		}

		// Invariant: with freshness, a CONFIRMED verdict's matched records are all fresh.
		if fresh && v.Decision == Confirmed {
			for _, r := range v.Matched {
				ts, err := ParseTimestamp(r["ts"])
				if err != nil {
					t.Fatalf("CONFIRMED with unparseable timestamp %v", r["ts"])
				}
				if age := fuzzNow.Sub(ts); age > time.Minute || age < -time.Minute {
					t.Fatalf("CONFIRMED with timestamp %v, age %v", ts, age)
				}
			}
		}

		// Invariant: judging is deterministic.
		if d := cmp.Diff(summarize(v), summarize(Judge(c, before, after, opts))); d != "" {
			t.Fatalf("second judgement differs:\n%s", d)
		}
		// Invariant: redaction never changes the verdict.
		var fields []string
		for _, r := range after.Records {
			for k := range r {
				fields = append(fields, k)
			}
		}
		if len(fields) > 0 {
			if d := cmp.Diff(invariantOf(v), invariantOf(Redaction{RedactFields: fields}.Apply(v, c))); d != "" {
				t.Fatalf("redaction changed the verdict:\n%s", d)
			}
		}
		// Invariant: nothing promotes a verdict.
		for _, to := range []Decision{Confirmed, Refuted, Indeterminate} {
			cp := v
			cp.Reasons = slices.Clone(v.Reasons)
			applied := Demote(&cp, to, "", "fuzz", Options{})
			if cp.Decision == Confirmed && v.Decision != Confirmed {
				t.Fatalf("Demote promoted %s to CONFIRMED", v.Decision)
			}
			if applied && cp.Decision == v.Decision {
				t.Fatalf("Demote applied without changing the decision")
			}
		}
		// Invariant: a task is due exactly for a non-confirmed irreversible verdict.
		irr := *c
		irr.Risk = Irreversible
		if task := NewTask("s", 0, "fuzz", &irr, &v, TaskOptions{}); (task == nil) != (v.Decision == Confirmed) {
			t.Fatalf("task %v for a %s verdict", task, v.Decision)
		}
	})
}

package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const okReads = `"before": {"reachable": true, "records": []}, "after": {"reachable": true, "records": []}`

func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input, code, path string
	}{
		{"not json", `{"effects": [`, "INVALID_CASE", "effects"},
		{"not an object", `[]`, "INVALID_CASE", ""},
		{"unknown case key", `{"effects": [{"kind": "record_written"}], "extra": 1, ` + okReads + `}`, "INVALID_CASE", "extra"},
		{"no effects", `{` + okReads + `}`, "INVALID_CASE", "effects"},
		{"effects not a list", `{"effects": {}, ` + okReads + `}`, "INVALID_CASE", "effects"},
		{"empty effects", `{"effects": [], ` + okReads + `}`, "INVALID_CASE", "effects"},
		{"missing before", `{"effects": [{"kind": "record_written"}], "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before"},
		{"reachable not bool", `{"effects": [{"kind": "record_written"}], "before": {"reachable": "yes", "records": []}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.reachable"},
		{"reachable without records", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.records"},
		{"unreachable with records", `{"effects": [{"kind": "record_written"}], "before": {"reachable": false, "records": [{"id": "1"}]}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.records"},
		{"record not object", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [1]}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.records[0]"},
		{"numeric param", `{"effects": [{"kind": "record_written"}], "params": {"pid": 1}, ` + okReads + `}`, "INVALID_CASE", "params.pid"},
		{"bad now", `{"effects": [{"kind": "record_written"}], "now": "yesterday", ` + okReads + `}`, "INVALID_CASE", "now"},
		{"bad freshness window", `{"effects": [{"kind": "record_written"}], "freshness": {"field": "ts", "window_s": -1}, ` + okReads + `}`, "INVALID_CASE", "freshness.window_s"},
		{"freshness unknown key", `{"effects": [{"kind": "record_written"}], "freshness": {"field": "ts", "window_s": 1, "x": 1}, ` + okReads + `}`, "INVALID_CASE", "freshness.x"},
		{"duplicate key", `{"effects": [{"kind": "record_written", "kind": "field_equals"}], ` + okReads + `}`, "INVALID_CASE", "effects"},
		{"duplicate record key", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [{"id": "1"}, {"id": "2", "id": "3"}]}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.records[1].id"},
		{"bad number in a record", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [{"id": 01}]}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.records[0].id"},
		{"unterminated record", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [{"id": "1"`, "INVALID_CASE", "before.records[0].id"},
		{"control character in a record", "{\"effects\": [{\"kind\": \"record_written\"}], \"before\": {\"reachable\": true, \"records\": [{\"note\": \"a\x01\"}]}, \"after\": {\"reachable\": true, \"records\": []}}", "INVALID_CASE", "before.records[0].note"},
		{"trailing data", `{"effects": [{"kind": "record_written"}], ` + okReads + `} x`, "INVALID_CASE", ""},
		{"contract refusal", `{"effects": [{"kind": "record_written", "match": {"id": 1}}], ` + okReads + `}`, "INVALID_CONTRACT", "effects[0].match.id"},
		{"second contract refusal", `{"effects": [{"kind": "record_written"}, {"kind": "nope"}], ` + okReads + `}`, "INVALID_CONTRACT", "effects[1].kind"},
		{"unbound param", `{"effects": [{"kind": "record_written", "match": {"p": {"param": "pid"}}}], ` + okReads + `}`, "UNBOUND_PARAM", "effects[0].match.p.param"},
		{"typed param does not parse", `{"effects": [{"kind": "record_written", "match": {"p": {"param": "pid", "as": "integer"}}}], "params": {"pid": "p1"}, ` + okReads + `}`, "UNBOUND_PARAM", "effects[0].match.p.param"},
		{"typed literal does not parse", `{"effects": [{"kind": "record_written", "match": {"p": {"literal": "yes", "as": "boolean"}}}], ` + okReads + `}`, "INVALID_CONTRACT", "effects[0].match.p.literal"},
		{"census without after_census", `{"effects": [{"kind": "record_written"}], "before_census": {"reachable": true, "records": []}, ` + okReads + `}`, "INVALID_CASE", "after_census"},
		{"census without before_census", `{"effects": [{"kind": "record_written"}], "after_census": {"reachable": true, "records": []}, ` + okReads + `}`, "INVALID_CASE", "before_census"},
		{"census not an object", `{"effects": [{"kind": "record_written"}], "before_census": [], "after_census": {"reachable": true, "records": []}, ` + okReads + `}`, "INVALID_CASE", "before_census"},
		{"census record not an object", `{"effects": [{"kind": "record_written"}], "before_census": {"reachable": true, "records": [1]}, "after_census": {"reachable": true, "records": []}, ` + okReads + `}`, "INVALID_CASE", "before_census.records[0]"},
		{"census unknown key", `{"effects": [{"kind": "record_written"}], "before_census": {"reachable": true, "records": [], "rows": []}, "after_census": {"reachable": true, "records": []}, ` + okReads + `}`, "INVALID_CASE", "before_census.rows"},
		{"code on a reachable read", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [], "code": "READ_INCOMPLETE"}, "after": {"reachable": true, "records": []}}`, "INVALID_CASE", "before.code"},
		{"code not text", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": []}, "after": {"reachable": false, "code": 1}}`, "INVALID_CASE", "after.code"},
		{"two unknown keys name the first by name", `{"effects": [{"kind": "record_written"}], "zz": 1, "aa": 2, ` + okReads + `}`, "INVALID_CASE", "aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, code := Run([]byte(tt.input), now)
			if code != ExitRefused {
				t.Fatalf("exit %d, want %d; output %s", code, ExitRefused, out)
			}
			var got Refusal
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("refusal is not JSON: %v", err)
			}
			if got.Error.Code != tt.code || got.Error.Path != tt.path {
				t.Errorf("got code %s path %q, want %s %q (message %q)", got.Error.Code, got.Error.Path, tt.code, tt.path, got.Error.Message)
			}
			if got.Error.Message == "" {
				t.Error("refusal has no message")
			}
		})
	}
}

func TestFreshnessUsesFallbackClockWithoutNow(t *testing.T) {
	t.Parallel()
	input := `{"effects": [{"kind": "record_written", "forbid_collateral_loss": false}],
	  "before": {"reachable": true, "records": []},
	  "after": {"reachable": true, "records": [{"id": "1", "ts": "2026-01-01T11:59:30Z"}]},
	  "freshness": {"field": "ts", "window_s": 60}}`
	for _, tt := range []struct {
		clock   time.Time
		verdict string
	}{
		{now, "CONFIRMED"},
		{now.Add(time.Hour), "INDETERMINATE"},
	} {
		out, code := Run([]byte(input), tt.clock)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, out)
		}
		var got Output
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.Effects[0].Verdict) != tt.verdict {
			t.Errorf("clock %s: verdict %s, want %s", tt.clock, got.Effects[0].Verdict, tt.verdict)
		}
	}
}

func TestOutputShape(t *testing.T) {
	t.Parallel()
	out, code := Run([]byte(`{"effects": [{"kind": "field_equals", "field": "note", "value": "x"}], `+okReads+`}`), now)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, key := range []string{`"outcome"`, `"verdict"`, `"result"`, `"reasons"`, `"observed_count"`, `"expected_count"`, `"observed_value"`, `"expected_value"`, `"contract_hash"`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("output lacks %s:\n%s", key, out)
		}
	}
}

// TestFastDecoderAgrees judges every bundled conformance case and a large
// generated case (judged in parallel) through ParseString (the fast
// decoder, compact batches) and Parse (maps): the outputs must agree, with
// matched records compared by canonical JSON.
func TestFastDecoderAgrees(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../cmd/verifyctl/testdata/cases/*.json")
	if err != nil || len(files) < 34 {
		t.Fatalf("found %d bundled cases (%v), want at least 34", len(files), err)
	}
	inputs := map[string][]byte{"generated-15k": []byte(benchCase(15_000))}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var wrapper struct {
			Case json.RawMessage `json:"case"`
		}
		if err := json.Unmarshal(raw, &wrapper); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		inputs[filepath.Base(f)] = wrapper.Case
	}
	for name, input := range inputs {
		slow, slowErr := Parse(input)
		fast, fastErr := ParseString(string(input))
		if (slowErr == nil) != (fastErr == nil) {
			t.Fatalf("%s: Parse error %v, ParseString error %v", name, slowErr, fastErr)
		}
		if slowErr != nil {
			if code(slowErr) != code(fastErr) {
				t.Errorf("%s: Parse refuses with %s, ParseString with %s", name, code(slowErr), code(fastErr))
			}
			continue
		}
		want, err1 := judgeCase(slow, now)
		got, err2 := judgeCase(fast, now)
		if err1 != nil || err2 != nil {
			if code(err1) != code(err2) {
				t.Errorf("%s: judge errors %v / %v", name, err1, err2)
			}
			continue
		}
		if diff := cmp.Diff(canonicalOutput(want), canonicalOutput(got), cmpopts.IgnoreUnexported(judge.Reason{})); diff != "" {
			t.Errorf("%s: fast decoder output differs (-maps +fast):\n%s", name, diff)
		}
	}
}

func code(err error) string {
	if e, ok := errors.AsType[*refusal.Error](err); ok {
		return e.Code
	}
	return fmt.Sprint(err)
}

func canonicalOutput(o *Output) *Output {
	cp := *o
	cp.Effects = append([]judge.EffectResult(nil), o.Effects...)
	for i := range cp.Effects {
		recs := make([]judge.Record, len(cp.Effects[i].MatchedRecords))
		for j, r := range cp.Effects[i].MatchedRecords {
			recs[j] = judge.Record{"canonical": judge.CanonicalJSON(r)}
		}
		cp.Effects[i].MatchedRecords = recs
	}
	return &cp
}

// TestParallelDecodeFallsBack: a large case is decoded in parallel from a
// guess of where the first read ends; a wrong guess (a record field named
// "after") and syntax errors on either side still give Parse's verdict or
// the exact path of the first fault.
func TestParallelDecodeFallsBack(t *testing.T) {
	t.Parallel()
	big := benchCase(10_000)
	if len(big) < parallelBytes {
		t.Fatalf("the case has %d bytes, below the parallel threshold", len(big))
	}
	// A field named "after" inside the baseline: the guess is wrong.
	tricky := strings.Replace(big, `"note": "routine follow-up"`, `"note": "x", "after": {"reachable": 1}`, 1)
	out, err := JudgeString(tricky, now)
	if err != nil || out.Outcome != "VERIFIED" {
		t.Fatalf("tricky case: outcome %v, error %v", out, err)
	}
	at := strings.Index(big, `"after": {"reachable": true, "records": [{"id": 1,`) + len(`"after": {"reachable": true, "records": [{"id": 1`)
	for _, tt := range []struct{ name, input, path string }{
		{"fault in the first read", strings.Replace(big, `"id": 7,`, `"id": 7,,`, 1), "before.records[6]"},
		{"fault in the second read", big[:at] + " 2" + big[at:], "after.records[0].id"},
		{"faults in both", strings.Replace(big[:at]+" 2"+big[at:], `"id": 3,`, `"id": 3 x,`, 1), "before.records[2].id"},
	} {
		_, err := JudgeString(tt.input, now)
		e, ok := errors.AsType[*refusal.Error](err)
		if !ok || e.Code != judge.CodeInvalidCase || e.Path != tt.path {
			t.Errorf("%s: %v, want INVALID_CASE at %s", tt.name, err, tt.path)
		}
	}
}

// TestCensusCase: a case's census reaches the judgement through both
// decoders, and an after read's code is reported.
func TestCensusCase(t *testing.T) {
	t.Parallel()
	base := `{"effects": [{"kind": "record_written", "match": {"applicant": "a1"}, "count_new_only": true}],
	  "before": {"reachable": true, "records": []},
	  "after": {"reachable": true, "records": [{"id": 5, "applicant": "a1"}]}`
	for _, tt := range []struct {
		name, input, verdict, class string
		codes                       []string
	}{
		{"no census", base + `}`, "CONFIRMED", "confirmed", []string{"COUNT_EXACT"}},
		{"re-assigned", base + `, "before_census": {"reachable": true, "records": [{"id": 5}]}, "after_census": {"reachable": true, "records": [{"id": 5}]}}`,
			"REFUTED", "conflicting", []string{"COUNT_UNDER", "EXISTING_RECORD_CHANGED"}},
		{"new", base + `, "before_census": {"reachable": true, "records": [{"id": 4}]}, "after_census": {"reachable": true, "records": [{"id": 4}, {"id": 5}]}}`,
			"CONFIRMED", "confirmed", []string{"COUNT_EXACT"}},
		{"unusable", base + `, "before_census": {"reachable": false, "code": "READ_MAY_BE_TRUNCATED"}, "after_census": {"reachable": true, "records": [{"id": 5}]}}`,
			"INDETERMINATE", "indeterminate", []string{"CENSUS_UNUSABLE"}},
		{"after read incomplete", `{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": []}, "after": {"reachable": false, "code": "READ_INCOMPLETE", "reason": "99 of 101"}}`,
			"INDETERMINATE", "indeterminate", []string{"READ_INCOMPLETE"}},
	} {
		slow, err := Parse([]byte(tt.input))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		fast, err := ParseString(tt.input)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for via, c := range map[string]*Case{"Parse": slow, "ParseString": fast} {
			out, err := judgeCase(c, now)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.name, via, err)
			}
			e := out.Effects[0]
			codes := []string{}
			for _, r := range e.Reasons {
				codes = append(codes, r.Code)
			}
			if string(e.Verdict) != tt.verdict || string(e.Result) != tt.class || !slices.Equal(codes, tt.codes) {
				t.Errorf("%s %s: %s %s %v, want %s %s %v", tt.name, via, e.Verdict, e.Result, codes, tt.verdict, tt.class, tt.codes)
			}
		}
	}
}

// TestStrictCaseRefusals: the case's top level is read by the strict
// decoder (sdk/unstable/strict) behind both decoders: the same INVALID_CASE, path
// and message from Parse and ParseString, in the strict decoder's words.
func TestStrictCaseRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, input, path, says string }{
		{"misspelt key", `{"effect": [{"kind": "record_written"}], ` + okReads + `}`, "effect", `(did you mean "effects"?)`},
		{"numeric param", `{"effects": [{"kind": "record_written"}], "params": {"pid": 1}, ` + okReads + `}`, "params.pid", "must be a string, got 1"},
		{"now a number", `{"effects": [{"kind": "record_written"}], "now": 5, ` + okReads + `}`, "now", "must be a string"},
		{"freshness a list", `{"effects": [{"kind": "record_written"}], "freshness": [], ` + okReads + `}`, "freshness", "must be a map, got a list"},
		{"window a string", `{"effects": [{"kind": "record_written"}], "freshness": {"field": "ts", "window_s": "1"}, ` + okReads + `}`, "freshness.window_s", "must be a number"},
		{"freshness misspelt key", `{"effects": [{"kind": "record_written"}], "freshness": {"field": "ts", "window": 1}, ` + okReads + `}`, "freshness.window", `(did you mean "window_s"?)`},
	} {
		_, slowErr := Parse([]byte(tt.input))
		_, fastErr := ParseString(tt.input)
		for _, err := range []error{slowErr, fastErr} {
			e, ok := errors.AsType[*refusal.Error](err)
			if !ok || e.Code != judge.CodeInvalidCase || e.Path != tt.path || !strings.Contains(e.Message, tt.says) {
				t.Errorf("%s: %v, want INVALID_CASE at %q saying %q", tt.name, err, tt.path, tt.says)
			}
		}
		if slowErr != nil && fastErr != nil && slowErr.Error() != fastErr.Error() {
			t.Errorf("%s: Parse says %q, ParseString %q", tt.name, slowErr, fastErr)
		}
	}
}

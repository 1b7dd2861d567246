package workflow

import (
	"strings"
	"testing"

	"github.com/verifierd/verifierd/judge"
)

func TestCheckNewness(t *testing.T) {
	t.Parallel()
	claim := judge.Effect{Kind: judge.RecordWritten, CountNewOnly: true}
	narrowed := Reader{Name: "0 (sql)", Narrowing: []string{"sql_query_params binds the run parameter(s) patient"}}
	for name, tc := range map[string]struct {
		p      Effective
		e      judge.Effect
		r      Reader
		refuse bool
	}{
		"narrowed claim":     {Defaults(), claim, narrowed, true},
		"narrowed exact set": {Defaults(), judge.Effect{Kind: judge.ExactNewSet}, narrowed, true},
		"census":             {Defaults(), claim, Reader{Name: "0 (sql)", Census: true, Narrowing: narrowed.Narrowing}, false},
		"declared whole":     {Defaults(), claim, Reader{Name: "0 (sql)", Newness: "whole_read", Narrowing: narrowed.Narrowing}, false},
		"declared newly":     {Defaults(), claim, Reader{Name: "0 (sql)", Newness: "newly_matching", Narrowing: narrowed.Narrowing}, false},
		"unnarrowed":         {Defaults(), claim, Reader{Name: "0 (sql)"}, false},
		"no change claim":    {Defaults(), judge.Effect{Kind: judge.RecordWritten}, narrowed, false},
		"field_equals":       {Defaults(), judge.Effect{Kind: judge.FieldEquals}, narrowed, false},
		"policy off":         {Resolve(&Policy{RequireProvenNewness: new(false)}), claim, narrowed, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs := CheckNewness(tc.p, tc.e, tc.r, 2, "effects[2]")
			if !tc.refuse {
				if len(fs) != 0 {
					t.Fatalf("findings %+v, want none", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("findings %+v, want one", fs)
			}
			f := fs[0]
			if f.Code != CodeNewnessUnproven || f.Effect != 2 || f.Path != "effects[2]" {
				t.Errorf("finding %+v", f)
			}
			for _, want := range []string{"0 (sql)", "sql_query_params binds the run parameter(s) patient", "census:", "newness: whole_read", "newness: newly_matching"} {
				if !strings.Contains(f.Message, want) {
					t.Errorf("message %q does not say %q", f.Message, want)
				}
			}
		})
	}
}

func TestRequireProvenNewnessParsed(t *testing.T) {
	t.Parallel()
	if !Defaults().RequireProvenNewness {
		t.Fatal("require_proven_newness must default to true")
	}
	p, err := ParsePolicy(map[string]any{"require_proven_newness": false}, "policy")
	if err != nil {
		t.Fatal(err)
	}
	if Resolve(p).RequireProvenNewness {
		t.Error("require_proven_newness: false did not take")
	}
	if _, err := ParsePolicy(map[string]any{"require_proven_newness": "no"}, "policy"); err == nil || !strings.Contains(err.Error(), "policy.require_proven_newness") {
		t.Errorf("err %v", err)
	}
}

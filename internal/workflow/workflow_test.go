package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestLoadExample(t *testing.T) {
	w, err := Load("testdata/claim-intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "claim-intake" || len(w.Steps) != 1 || !strings.HasPrefix(w.Digest, "sha256:") {
		t.Fatalf("loaded %+v", w)
	}
	s, ok := w.Step("save_claim")
	if !ok || s.Risk != RiskIrreversible || len(s.Effects) != 2 || len(s.Enters) != 3 {
		t.Fatalf("step %+v", s)
	}
	if diff := cmp.Diff(map[string]bool{"password": true}, w.SecretParams()); diff != "" {
		t.Fatal(diff)
	}
	got := CheckContracts(Resolve(&Policy{SubjectParams: []string{"claim_no"}}), s.Effects, w.SecretParams(), "effects")
	if len(got) != 0 {
		t.Fatalf("findings on a clean step: %+v", got)
	}
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	head := "schema: verifierd.workflow/v1\nname: w\nparams: {a: {}}\n"
	for name, tc := range map[string]struct{ doc, path string }{
		"schema":        {"schema: other/v1\nname: w\nsteps: [{step: s}]\n", "schema"},
		"unknown key":   {head + "steps: [{step: s}]\nextra: 1\n", "extra"},
		"step key":      {head + "steps: [{step: s, action: click}]\n", "steps[0].action"},
		"no steps":      {head + "steps: []\n", "steps"},
		"dup step":      {head + "steps: [{step: s}, {step: s}]\n", "steps[1].step"},
		"bad risk":      {head + "steps: [{step: s, risk: maybe}]\n", "steps[0].risk"},
		"enters undecl": {head + "steps: [{step: s, enters: [b]}]\n", "steps[0].enters[0]"},
		"bad effect":    {head + "steps: [{step: s, effects: [{kind: nope}]}]\n", "steps[0].effects[0].kind"},
		"bad secret":    {"schema: verifierd.workflow/v1\nname: w\nparams: {a: {secret: yes please}}\nsteps: [{step: s}]\n", "params.a.secret"},
		"bad min_tier":  {head + "policy: {min_tier: 5}\nsteps: [{step: s}]\n", "policy.min_tier"},
		"bad settle":    {head + "policy: {min_settle_s: 4000}\nsteps: [{step: s}]\n", "policy.min_settle_s"},
		"step subject":  {head + "steps: [{step: s, subject_params: [1]}]\n", "steps[0].subject_params[0]"},
		"step subjects": {head + "steps: [{step: s, subject_params: a}]\n", "steps[0].subject_params"},
		"binding map":   {head + "binding: yes\nsteps: [{step: s}]\n", "binding"},
		"binding key":   {head + "binding: {binding_digest: " + zeroDigest + ", source_digest: " + zeroDigest + ", by: me}\nsteps: [{step: s}]\n", "binding.by"},
		"binding dgst":  {head + "binding: {binding_digest: sha256:abc, source_digest: " + zeroDigest + "}\nsteps: [{step: s}]\n", "binding.binding_digest"},
		"binding src":   {head + "binding: {binding_digest: " + zeroDigest + "}\nsteps: [{step: s}]\n", "binding.source_digest"},
		"binding cov":   {head + "binding: {binding_digest: " + zeroDigest + ", source_digest: " + zeroDigest + ", coverage: [1]}\nsteps: [{step: s}]\n", "binding.coverage"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if we, ok := errors.AsType[*refusal.Error](err); ok {
				if we.Path != tc.path {
					t.Fatalf("path %q, want %q (%v)", we.Path, tc.path, err)
				}
				return
			}
			if !strings.HasPrefix(err.Error(), tc.path) {
				t.Fatalf("error %q does not name %q", err, tc.path)
			}
		})
	}
}

func TestGuards(t *testing.T) {
	t.Parallel()
	w, err := Parse([]byte(`schema: verifierd.workflow/v1
name: w
params: {pid: {}, note: {}, pw: {secret: true}}
steps:
  - step: idle
    effects: [{kind: field_equals, match: {type: Triage}, field: note, value: {param: note}}]
  - step: secret
    effects: [{kind: record_written, match: {pid: {param: pid}, pw: {param: pw}}, count_new_only: true}]
  - step: secret in a template
    effects: [{kind: record_written, match: {subject: {template: "Patient/{pid}"}, ref: {template: "x-{pw}"}}, count_new_only: true}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := Resolve(&Policy{SubjectParams: []string{"pid"}})
	var codes []string
	for _, f := range CheckContracts(p, w.Steps[0].Effects, w.SecretParams(), "effects") {
		codes = append(codes, f.Code)
	}
	if diff := cmp.Diff([]string{CodeNoChangeClaim, CodeSubjectNotSelected}, codes); diff != "" {
		t.Fatal(diff)
	}
	codes = nil
	for _, f := range CheckContracts(p, w.Steps[1].Effects, w.SecretParams(), "effects") {
		codes = append(codes, f.Code)
	}
	if diff := cmp.Diff([]string{CodeSecretParamInContract}, codes); diff != "" {
		t.Fatal(diff)
	}
	// A template's placeholders are parameters like {param}: the secret
	// is refused, the subject counts as selected.
	codes = nil
	for _, f := range CheckContracts(p, w.Steps[2].Effects, w.SecretParams(), "effects") {
		codes = append(codes, f.Code)
	}
	if diff := cmp.Diff([]string{CodeSecretParamInContract}, codes); diff != "" {
		t.Fatalf("template: %s", diff)
	}
	off := false
	relaxed := Resolve(&Policy{SubjectParams: []string{"pid"}}, &Policy{RequireChangeClaim: &off})
	if relaxed.RequireChangeClaim || len(relaxed.SubjectParams) != 1 {
		t.Fatalf("layering: %+v", relaxed)
	}
	if got := CheckTier(Resolve(&Policy{MinTier: new(2)}), 3, "ui_readback", 0, "effects[0]"); len(got) != 1 || got[0].Code != CodeWeakTier {
		t.Fatalf("tier: %+v", got)
	}
	if got := CheckTier(Resolve(), 4, "x", 0, "effects[0]"); len(got) != 0 {
		t.Fatalf("default min_tier refused tier 4: %+v", got)
	}
}

var zeroDigest = "sha256:" + strings.Repeat("0", 64)

func TestParseBinding(t *testing.T) {
	t.Parallel()
	one := "sha256:" + strings.Repeat("1", 64)
	w, err := Parse([]byte("schema: verifierd.workflow/v1\nname: w\nsteps: [{step: s}]\nbinding:\n  binding_digest: " + one +
		"\n  source_digest: " + zeroDigest + "\n  coverage: {compared: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Binding{BindingDigest: one, SourceDigest: zeroDigest, Coverage: map[string]any{"compared": json.Number("1")}}
	if diff := cmp.Diff(want, w.Binding); diff != "" {
		t.Fatal(diff)
	}
	w, err = Parse([]byte("schema: verifierd.workflow/v1\nname: w\nsteps: [{step: s}]\n"))
	if err != nil || w.Binding != nil {
		t.Fatalf("no binding block: %+v, %v", w, err)
	}
}

// TestChangeClaims: a claim of zero new records, or an empty new set,
// claims no change; the forms still count as change claims for settling.
func TestChangeClaims(t *testing.T) {
	t.Parallel()
	w, err := Parse([]byte(`schema: verifierd.workflow/v1
name: w
params: {p: {}}
steps:
  - step: zero
    effects: [{kind: record_written, match: {p: {param: p}}, count_new_only: true, expected_count: 0}]
  - step: empty
    effects: [{kind: exact_new_set, new_records: [], expected_count: 0}]
  - step: one
    effects: [{kind: record_written, match: {p: {param: p}}, count_new_only: true}]
  - step: set
    effects: [{kind: exact_new_set, new_records: [{p: {param: p}}], expected_count: 1}]
  - step: all
    effects: [{kind: record_written, match: {p: {param: p}}, expected_count: 1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ claims, form bool }{{false, true}, {false, true}, {true, true}, {true, true}, {false, false}} {
		s := w.Steps[i]
		if got := HasChangeClaim(s.Effects); got != want.claims {
			t.Errorf("step %s: HasChangeClaim = %v, want %v", s.Name, got, want.claims)
		}
		if got := IsChangeClaim(s.Effects[0]); got != want.form {
			t.Errorf("step %s: IsChangeClaim = %v, want %v", s.Name, got, want.form)
		}
		fs := CheckContracts(Resolve(), s.Effects, nil, "effects")
		if refused := len(fs) > 0 && fs[0].Code == CodeNoChangeClaim; refused == want.claims {
			t.Errorf("step %s: findings %+v", s.Name, fs)
		}
	}
}

// TestStepSubjectParams: a step's own subject_params replace the
// policy's for that step; a step without them keeps the policy's.
func TestStepSubjectParams(t *testing.T) {
	t.Parallel()
	w, err := Parse([]byte(`schema: verifierd.workflow/v1
name: w
params: {patient: {}, claim: {}}
policy: {subject_params: [patient]}
steps:
  - step: register
    risk: irreversible
    effects: [{kind: record_written, match: {patient: {param: patient}}, count_new_only: true}]
  - step: file_claim
    subject_params: [claim]
    effects: [{kind: record_written, match: {claim: {param: claim}}, count_new_only: true}]
  - step: anyone
    subject_params: []
    effects: [{kind: record_written, match: {type: x}, count_new_only: true}]
`))
	if err != nil {
		t.Fatal(err)
	}
	base := Resolve(w.Policy)
	for i, want := range [][]string{{"patient"}, {"claim"}, {}} {
		s := &w.Steps[i]
		p := base.ForStep(s)
		if diff := cmp.Diff(want, p.SubjectParams); diff != "" {
			t.Errorf("step %s subject_params (-want +got):\n%s", s.Name, diff)
		}
		if fs := CheckContracts(p, s.Effects, nil, "effects"); len(fs) != 0 {
			t.Errorf("step %s: findings %+v", s.Name, fs)
		}
	}
	// Under the workflow's list, the claim step would be refused.
	if fs := CheckContracts(base, w.Steps[1].Effects, nil, "effects"); len(fs) != 1 || fs[0].Code != CodeSubjectNotSelected {
		t.Errorf("claim step under the workflow policy: %+v", fs)
	}
	if !w.Steps[0].Irreversible() || w.Steps[1].Irreversible() {
		t.Errorf("Irreversible: register %v, file_claim %v", w.Steps[0].Irreversible(), w.Steps[1].Irreversible())
	}
	if base.ForStep(nil).SubjectParams[0] != "patient" {
		t.Error("ForStep(nil) changed the policy")
	}
}

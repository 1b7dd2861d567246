package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/workflow"
)

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func decodeBind(t *testing.T, out []byte) bindReport {
	t.Helper()
	var r bindReport
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	return r
}

func claimIntakeCoverage() bindCoverage {
	reason := "free text; the claims system stores it reformatted, so an exact comparison would refute correct writes"
	return bindCoverage{Fields: 3, Compared: 2, NotCompared: 1, Steps: []bindStepCoverage{{
		Step: "save_claim",
		Fields: []fieldCoverage{
			{Param: "claim_no", ComparedBy: []int{0, 1}},
			{Param: "member_no", ComparedBy: []int{1}},
			{Param: "visit_note", ComparedBy: []int{}, NotCompared: &reason},
		},
	}}}
}

func TestBindClaimIntake(t *testing.T) {
	t.Parallel()
	src, bindingFile := claimIntake+"workflow.yaml", claimIntake+"record-checks.yaml"
	before := fileDigest(t, src)
	want := bindReport{
		Workflow:      "claim-intake",
		SourceDigest:  before,
		BindingDigest: fileDigest(t, bindingFile),
		Coverage:      claimIntakeCoverage(),
		Steps:         []bindStepChange{{Step: "save_claim", Added: 2}},
	}

	out, code := runCLI(t, "bind", "--workflow", src, "--binding", bindingFile, "--check")
	if code != exitOK {
		t.Fatalf("--check exit %d: %s", code, out)
	}
	if diff := cmp.Diff(want, decodeBind(t, out)); diff != "" {
		t.Fatalf("--check (-want +got):\n%s", diff)
	}

	dst := filepath.Join(t.TempDir(), "workflow.bound.yaml")
	out, code = runCLI(t, "bind", "--workflow", src, "--binding", bindingFile, "--out", dst)
	if code != exitOK {
		t.Fatalf("--out exit %d: %s", code, out)
	}
	want.Written = &dst
	if diff := cmp.Diff(want, decodeBind(t, out)); diff != "" {
		t.Fatalf("--out (-want +got):\n%s", diff)
	}
	if got := fileDigest(t, src); got != before {
		t.Fatalf("the source changed: %s, was %s", got, before)
	}

	// The new file loads, carries the contracts on save_claim only, and
	// records the binding and source digests and the coverage.
	w, err := workflow.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	var effects []int
	for _, s := range w.Steps {
		effects = append(effects, len(s.Effects))
	}
	if diff := cmp.Diff([]int{0, 0, 2}, effects); diff != "" {
		t.Fatalf("effects per step (-want +got):\n%s", diff)
	}
	if w.Name != "claim-intake" || w.Policy == nil || len(w.Params) != 4 || !w.SecretParams()["clerk_password"] {
		t.Fatalf("name, policy or params changed: %+v", w)
	}
	if w.Binding == nil || w.Binding.BindingDigest != want.BindingDigest || w.Binding.SourceDigest != before {
		t.Fatalf("binding block %+v, want digests %s and %s", w.Binding, want.BindingDigest, before)
	}
	covJSON, err := json.Marshal(w.Binding.Coverage)
	if err != nil {
		t.Fatal(err)
	}
	var cov bindCoverage
	if err := json.Unmarshal(covJSON, &cov); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claimIntakeCoverage(), cov); diff != "" {
		t.Fatalf("recorded coverage (-want +got):\n%s", diff)
	}

	// ... and lints clean, even under --require-effects-for-irreversible.
	out, code = runCLI(t, "lint", "--workflow", dst, "--require-effects-for-irreversible")
	if code != exitOK {
		t.Fatalf("lint of the bound workflow: exit %d: %s", code, out)
	}
	wantLint := lintReport{Workflow: "claim-intake", Coverage: lintCoverage{IrreversibleSteps: 1, WithContract: 1, Percent: 100}, Findings: []lintFinding{}}
	if diff := cmp.Diff(wantLint, decodeLint(t, out)); diff != "" {
		t.Fatalf("lint of the bound workflow (-want +got):\n%s", diff)
	}

	// Binding again refuses: --out exists, and the file records a binding.
	out, code = runCLI(t, "bind", "--workflow", src, "--binding", bindingFile, "--out", dst)
	if code != exitInvalid || !strings.Contains(string(out), `"path": "--out"`) {
		t.Fatalf("--out over an existing file: exit %d: %s", code, out)
	}
	out, code = runCLI(t, "bind", "--workflow", dst, "--binding", bindingFile, "--check")
	if code != exitInvalid {
		t.Fatalf("binding a bound workflow: exit %d: %s", code, out)
	}
	refusals := decodeRefusal(t, out)
	if diff := cmp.Diff([]string{""}, paths(refusals)); diff != "" {
		t.Fatalf("refusal paths (-want +got):\n%s\n%s", diff, out)
	}
}

type refusalOutput struct {
	Error    struct{ Code, Message, Path string } `json:"error"`
	Refusals []bindRefusal                        `json:"refusals"`
}

func decodeRefusal(t *testing.T, out []byte) refusalOutput {
	t.Helper()
	var r refusalOutput
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if r.Error.Code != "BINDING_REFUSED" || len(r.Refusals) == 0 || r.Error.Path != r.Refusals[0].Path || r.Error.Message != r.Refusals[0].Message {
		t.Fatalf("error %+v does not lead the refusals %+v", r.Error, r.Refusals)
	}
	return r
}

func paths(r refusalOutput) []string {
	var out []string
	for _, x := range r.Refusals {
		out = append(out, x.Path)
	}
	return out
}

func TestBindRefusals(t *testing.T) {
	t.Parallel()
	src := claimIntake + "workflow.yaml"
	digest := fileDigest(t, src)
	const (
		head   = "schema: verifierd.record-check-binding/v1\nworkflow_name: claim-intake\n"
		claim  = "{kind: record_written, match: {claim_no: {param: claim_no}}, count_new_only: true}"
		member = "{kind: field_equals, match: {claim_no: {param: claim_no}}, field: member_no, value: {param: member_no}}"
		note   = "not_compared: {visit_note: free text}\n"
	)
	step := func(effects ...string) string {
		return "steps:\n  - step: save_claim\n    effects: [" + strings.Join(effects, ", ") + "]\n"
	}
	for name, tc := range map[string]struct {
		doc   string
		paths []string
		// phrase is in the first refusal's message.
		phrase string
	}{
		"no change claim": {
			doc: head + step(member) + note, paths: []string{"steps[0].effects"}, phrase: "claims a change"},
		"record_written selects through no parameter": {
			doc: head + step("{kind: record_written, match: {type: claim}, count_new_only: true}", member) + note, paths: []string{"steps[0].effects[0].match"}, phrase: "through a run parameter"},
		"field_equals selects through no parameter": {
			doc: head + step(claim, "{kind: field_equals, match: {type: claim}, field: member_no, value: {param: member_no}}") + note, paths: []string{"steps[0].effects[1].match"}, phrase: "field_equals must select"},
		"subject parameter of the workflow's policy": {
			doc: head + step(claim, "{kind: field_equals, match: {member_no: {param: member_no}}, field: status, value: open}") + note, paths: []string{"steps[0].effects[1]"}, phrase: `subject parameter "claim_no"`},
		"exact_new_set selects through no parameter": {
			doc: head + step(claim, member, "{kind: exact_new_set, new_records: [{type: claim}]}") + note, paths: []string{"steps[0].effects[2].new_records"}, phrase: "exact_new_set must select"},
		"secret parameter": {
			doc: head + step(claim, member, "{kind: field_equals, match: {claim_no: {param: claim_no}}, field: pw, value: {param: clerk_password}}") + note, paths: []string{"steps[0].effects[2]"}, phrase: `"clerk_password"`},
		"intent guard": {
			doc: head + "steps:\n  - step: save_claim\n    intent: click Save\n    effects: [" + claim + ", " + member + "]\n" + note, paths: []string{"steps[0].intent"}, phrase: "recompiled"},
		"entered parameter not compared": {
			doc: head + step(claim, member), paths: []string{"steps[0].effects"}, phrase: `enters "visit_note"`},
		"workflow name": {
			doc: strings.Replace(head, "claim-intake", "other", 1) + step(claim, member) + note, paths: []string{"workflow_name"}, phrase: `"other"`},
		"source pin": {
			doc: head + "source_content_digest: sha256:" + strings.Repeat("0", 64) + "\n" + step(claim, member) + note, paths: []string{"source_content_digest"}, phrase: "changed since"},
		"unknown step": {
			doc: head + "steps:\n  - step: step_99\n    effects: [" + claim + "]\n", paths: []string{"steps[0].step"}, phrase: `no step "step_99"`},
		"undeclared parameter": {
			doc: head + step(claim, member, "{kind: field_equals, match: {claim_no: {param: claim_no}}, field: x, value: {param: nope}}") + note, paths: []string{"steps[0].effects[2]"}, phrase: `"nope"`},
		"not_compared undeclared": {
			doc: head + step(claim, member) + "not_compared: {visit_note: free text, ghost: gone}\n", paths: []string{"not_compared.ghost"}, phrase: "not declared"},
		"schema": {
			doc: strings.Replace(head, "verifierd.record-check-binding/v1", "other/v1", 1) + step(claim, member) + note, paths: []string{"schema"}, phrase: bindingSchema},
		"unknown key": {
			doc: head + step(claim, member) + note + "approved_by: me\n", paths: []string{"approved_by"}, phrase: "unknown key"},
		"bad contract": {
			doc: head + step("{kind: record_written, match: {claim_no: 7}, count_new_only: true}") + note, paths: []string{"steps[0].effects[0].match.claim_no"}},
		"empty reason": {
			doc: head + step(claim, member) + "not_compared: {visit_note: ''}\n", paths: []string{"not_compared.visit_note"}, phrase: "reason"},
		"accepted with the pin and the carried schema": {
			doc: strings.Replace(head, "verifierd.", "openadapt.", 1) + "source_content_digest: " + digest + "\n" + step(claim, member) + note},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wf := src
			bf := filepath.Join(t.TempDir(), "binding.yaml")
			if err := os.WriteFile(bf, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "out.yaml")
			out, code := runCLI(t, "bind", "--workflow", wf, "--binding", bf, "--out", dst)
			if tc.paths == nil {
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, out)
				}
				return
			}
			if code != exitInvalid {
				t.Fatalf("exit %d, want 2: %s", code, out)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Fatalf("a refused binding wrote %s (%v)", dst, err)
			}
			r := decodeRefusal(t, out)
			if diff := cmp.Diff(tc.paths, paths(r)); diff != "" {
				t.Fatalf("refusal paths (-want +got):\n%s\n%s", diff, out)
			}
			if !strings.Contains(r.Error.Message, tc.phrase) {
				t.Fatalf("message %q does not contain %q", r.Error.Message, tc.phrase)
			}
			// --check refuses the same way and writes nothing either.
			out2, code := runCLI(t, "bind", "--workflow", wf, "--binding", bf, "--check")
			if code != exitInvalid || !bytes.Equal(out, out2) {
				t.Fatalf("--check: exit %d: %s, want the --out refusal %s", code, out2, out)
			}
		})
	}
}

// TestBindKeepsAndReplaces: bind updates a step as the kit does. The
// step's confirmed contract is kept (first), its placeholder replaced, the
// binding's contracts added after it, and one equal to a kept contract not
// added twice; --check and --out say so per step, the coverage counts the
// kept contract, and the file written loads and lints clean. A placeholder
// in a step the binding does not bind is refused.
func TestBindKeepsAndReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, err := os.ReadFile(claimIntake + "workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const status = "{kind: field_equals, match: {claim_no: {param: claim_no}}, field: status, value: open}"
	src := writeTemp(t, dir, "workflow.yaml", string(data)+"    effects:\n"+
		"      - {kind: placeholder, note: the recorder saw a Save click}\n"+
		"      - "+status+"\n")
	binding := writeTemp(t, dir, "binding.yaml", `schema: openadapt.record-check-binding/v1
workflow_name: claim-intake
steps:
  - step: save_claim
    effects:
      - `+status+`
      - {kind: record_written, match: {claim_no: {param: claim_no}}, expected_count: 1, count_new_only: true}
      - {kind: field_equals, match: {claim_no: {param: claim_no}}, field: member_no, value: {param: member_no}}
not_compared: {visit_note: free text}
`)
	note := "free text"
	want := bindReport{
		Workflow: "claim-intake", SourceDigest: fileDigest(t, src), BindingDigest: fileDigest(t, binding),
		Coverage: bindCoverage{Fields: 3, Compared: 2, NotCompared: 1, Steps: []bindStepCoverage{{Step: "save_claim", Fields: []fieldCoverage{
			{Param: "claim_no", ComparedBy: []int{0, 1, 2}},
			{Param: "member_no", ComparedBy: []int{2}},
			{Param: "visit_note", ComparedBy: []int{}, NotCompared: &note},
		}}}},
		Steps: []bindStepChange{{Step: "save_claim", Kept: 1, Replaced: 1, Added: 2, AlreadyKept: 1}},
	}
	out, code := runCLI(t, "bind", "--workflow", src, "--binding", binding, "--check")
	if code != exitOK {
		t.Fatalf("--check exit %d: %s", code, out)
	}
	if diff := cmp.Diff(want, decodeBind(t, out)); diff != "" {
		t.Fatalf("--check (-want +got):\n%s", diff)
	}
	// The source with its placeholder does not load: the gate refuses it.
	if _, err := workflow.Load(src); err == nil {
		t.Fatal("a workflow holding a placeholder loads")
	}
	// lint names the placeholder and the way to replace it.
	out, code = runCLI(t, "lint", "--workflow", src)
	if code != exitInvalid || !strings.Contains(string(out), `"path": "steps[2].effects[0]"`) || !strings.Contains(string(out), "verifyctl bind") {
		t.Fatalf("lint of a workflow with a placeholder: exit %d: %s", code, out)
	}

	dst := filepath.Join(dir, "bound.yaml")
	out, code = runCLI(t, "bind", "--workflow", src, "--binding", binding, "--out", dst)
	if code != exitOK {
		t.Fatalf("--out exit %d: %s", code, out)
	}
	want.Written = &dst
	if diff := cmp.Diff(want, decodeBind(t, out)); diff != "" {
		t.Fatalf("--out (-want +got):\n%s", diff)
	}
	w, err := workflow.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	got := w.Steps[2].Effects
	if len(got) != 3 || got[0].Kind != "field_equals" || got[0].Field != "status" || got[1].Kind != "record_written" || got[2].Field != "member_no" {
		t.Fatalf("save_claim's effects %+v; want the kept status check, then the record_written and the member_no check", got)
	}
	if bound, _ := os.ReadFile(dst); bytes.Contains(bound, []byte(placeholderKind)) {
		t.Fatalf("the placeholder survived:\n%s", bound)
	}
	if w.Binding == nil || w.Binding.SourceDigest != want.SourceDigest || w.Binding.BindingDigest != want.BindingDigest {
		t.Fatalf("binding block %+v", w.Binding)
	}
	if out, code := runCLI(t, "lint", "--workflow", dst, "--require-effects-for-irreversible"); code != exitOK {
		t.Fatalf("lint of the bound workflow: exit %d: %s", code, out)
	}

	// A placeholder left in a step the binding does not bind.
	other := writeTemp(t, dir, "other.yaml", strings.Replace(string(data), "    risk: read_only\n", "    risk: read_only\n    effects: [{kind: placeholder}]\n", 1))
	out, code = runCLI(t, "bind", "--workflow", other, "--binding", claimIntake+"record-checks.yaml", "--check")
	if code != exitInvalid {
		t.Fatalf("an unbound placeholder: exit %d: %s", code, out)
	}
	r := decodeRefusal(t, out)
	if diff := cmp.Diff([]string{"steps"}, paths(r)); diff != "" || !strings.Contains(r.Error.Message, `"open_new_claim"`) {
		t.Fatalf("refusal paths (-want +got):\n%s\n%s", diff, out)
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBindUsage(t *testing.T) {
	t.Parallel()
	src, bf := claimIntake+"workflow.yaml", claimIntake+"record-checks.yaml"
	for name, args := range map[string][]string{
		"no mode":    {"bind", "--workflow", src, "--binding", bf},
		"both modes": {"bind", "--workflow", src, "--binding", bf, "--check", "--out", filepath.Join(t.TempDir(), "x.yaml")},
		"no binding": {"bind", "--workflow", src, "--check"},
	} {
		out, code := runCLI(t, args...)
		if code != exitInvalid || len(out) != 0 {
			t.Errorf("%s: exit %d, stdout %s; want 2 and a usage error on stderr", name, code, out)
		}
	}
}

func TestBindJSONSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "workflow.json")
	doc := `{"schema": "verifierd.workflow/v1", "name": "claim-intake",
 "params": {"claim_no": {}, "member_no": {}, "visit_note": {}, "n": {}},
 "steps": [{"step": "save_claim", "intent": "fill in the claim form and press Save", "risk": "irreversible",
            "enters": ["claim_no", "member_no", "visit_note"]},
           {"step": "count", "risk": "read_only", "intent": "1"}]}`
	if err := os.WriteFile(src, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "workflow.bound.yaml")
	out, code := runCLI(t, "bind", "--workflow", src, "--binding", claimIntake+"record-checks.yaml", "--out", dst)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	data, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(data, []byte("{")) || !bytes.Contains(data, []byte("\nsteps:\n")) {
		t.Fatalf("a JSON source should become block-style YAML:\n%s", data)
	}
	w, err := workflow.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	// The intent "1" stays text, not a number, once unquoted.
	if len(w.Steps[0].Effects) != 2 || w.Steps[1].Intent != "1" || w.Binding == nil || w.Binding.SourceDigest != fileDigest(t, src) {
		t.Fatalf("bound workflow %+v", w)
	}
}

// FuzzCheckBinding: any binding file is refused or accepted, never a panic,
// and an accepted one writes a workflow that loads.
func FuzzCheckBinding(f *testing.F) {
	src, err := os.ReadFile(claimIntake + "workflow.yaml")
	if err != nil {
		f.Fatal(err)
	}
	w, err := workflow.Parse(src)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(claimIntake + "record-checks.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("schema: verifierd.record-check-binding/v1\nworkflow_name: claim-intake\nsteps: [{step: save_claim, effects: [{kind: exact_new_set, new_records: [{claim_no: {param: claim_no}}]}]}]\n"))
	f.Add([]byte(`{"schema": "openadapt.record-check-binding/v1", "steps": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, cov, refusals := checkBinding(w, nil, data)
		if len(refusals) > 0 {
			return
		}
		bound, err := boundWorkflow(src, data, b, cov)
		if err != nil {
			// YAML the judge's decoder reads but yaml.v3 alone does not (or
			// aliases) is refused here, not written.
			return
		}
		if _, err := workflow.Parse(bound); err != nil {
			t.Fatalf("accepted binding wrote a workflow that does not load: %v\n%s", err, bound)
		}
	})
}

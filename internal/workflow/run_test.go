package workflow

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// runHead is a three-step process: intake writes a patient, posting (after
// intake) takes the patient id from intake's record and produces a letter,
// sending consumes the letter.
const runHead = `schema: verifierd.workflow/v1
name: clinic
params: {name: {}, patient_id: {}, amount: {}, pw: {secret: true}}
policy: {run_min_tier: 1}
steps:
  - step: intake
    risk: irreversible
    enters: [name]
    effects:
      - {kind: record_written, match: {name: {param: name}}, count_new_only: true}
`

const runTail = `  - step: posting
    after: [intake]
    enters: [amount]
    handoffs: [{param: patient_id, from: {step: intake, effect: 0, field: id}}]
    produces: [{artifact: letter, deployment: docs}]
    effects:
      - {kind: record_written, match: {patient_id: {param: patient_id}, amount: {param: amount}}, count_new_only: true}
  - step: send
    risk: read_only
    consumes: [{artifact: letter, from_step: posting}]
    effects:
      - {kind: record_written, match: {name: {param: name}}}
`

func TestRunKeys(t *testing.T) {
	t.Parallel()
	w, err := Parse([]byte(runHead + runTail))
	if err != nil {
		t.Fatal(err)
	}
	posting, _ := w.Step("posting")
	want := &Step{After: []string{"intake"}, Handoffs: []Handoff{{Param: "patient_id", From: HandoffSource{Step: "intake", Effect: 0, Field: "id"}}}, Produces: []string{"letter"}}
	if diff := cmp.Diff(want, &Step{After: posting.After, Handoffs: posting.Handoffs, Produces: posting.Produces, Consumes: posting.Consumes}); diff != "" {
		t.Fatal(diff)
	}
	send, _ := w.Step("send")
	if diff := cmp.Diff([]Consume{{Artifact: "letter", FromStep: "posting"}}, send.Consumes); diff != "" {
		t.Fatal(diff)
	}
	if send.Consequential() || !posting.Consequential() {
		t.Fatalf("consequential: send %v posting %v; read_only is not, the default reversible is", send.Consequential(), posting.Consequential())
	}
	if p, ok := w.Producer("letter"); !ok || p.Name != "posting" || !w.Consumed("letter") {
		t.Fatalf("Producer(letter) = %v %v", p, ok)
	}
	if diff := cmp.Diff([]string{"posting"}, send.Predecessors()); diff != "" {
		t.Fatal(diff)
	}
	if got := Resolve(w.Policy).RunMinTier; got != 1 {
		t.Fatalf("run_min_tier %d, want the workflow's 1", got)
	}
	if got := Resolve().RunMinTier; got != DefaultRunMinTier || DefaultRunMinTier != 2 {
		t.Fatalf("default run_min_tier %d, want 2", got)
	}
}

func TestRunKeyRefusals(t *testing.T) {
	t.Parallel()
	step := func(body string) string {
		return runHead + "  - step: posting\n    enters: [amount, patient_id]\n" + body +
			"    effects:\n      - {kind: record_written, match: {amount: {param: amount}}, count_new_only: true}\n"
	}
	for name, tc := range map[string]struct{ doc, path, says string }{
		"after unknown":    {step("    after: [intak]\n"), "steps[1].after[0]", `no step "intak"`},
		"after self":       {step("    after: [posting]\n"), "steps[1].after[0]", "itself"},
		"after twice":      {step("    after: [intake, intake]\n"), "steps[1].after[1]", "twice"},
		"after not a list": {step("    after: intake\n"), "steps[1].after", ""},
		"handoff key":      {step("    handoffs: [{param: patient_id, form: {}}]\n"), "steps[1].handoffs[0].form", ""},
		"handoff no param": {step("    handoffs: [{from: {step: intake, effect: 0, field: id}}]\n"), "steps[1].handoffs[0].param", ""},
		"handoff undecl":   {step("    handoffs: [{param: pid, from: {step: intake, effect: 0, field: id}}]\n"), "steps[1].handoffs[0].param", "not declared"},
		"handoff unused":   {step("    handoffs: [{param: name, from: {step: intake, effect: 0, field: id}}]\n"), "steps[1].handoffs[0].param", "uses no parameter"},
		"handoff twice": {step("    handoffs: [{param: patient_id, from: {step: intake, effect: 0, field: id}}, {param: patient_id, from: {step: intake, effect: 0, field: id}}]\n"),
			"steps[1].handoffs[1].param", "twice"},
		"handoff no from":   {step("    handoffs: [{param: patient_id}]\n"), "steps[1].handoffs[0].from", ""},
		"handoff step":      {step("    handoffs: [{param: patient_id, from: {step: nope, effect: 0, field: id}}]\n"), "steps[1].handoffs[0].from.step", `no step "nope"`},
		"handoff effect":    {step("    handoffs: [{param: patient_id, from: {step: intake, effect: 1, field: id}}]\n"), "steps[1].handoffs[0].from.effect", "has 1 effects"},
		"handoff neg":       {step("    handoffs: [{param: patient_id, from: {step: intake, effect: -1, field: id}}]\n"), "steps[1].handoffs[0].from.effect", "from 0 to 0"},
		"handoff effect nm": {step("    handoffs: [{param: patient_id, from: {step: intake, effect: first, field: id}}]\n"), "steps[1].handoffs[0].from.effect", "index"},
		"handoff no effect": {step("    handoffs: [{param: patient_id, from: {step: intake, field: id}}]\n"), "steps[1].handoffs[0].from.effect", "index"},
		"handoff no field":  {step("    handoffs: [{param: patient_id, from: {step: intake, effect: 0}}]\n"), "steps[1].handoffs[0].from.field", ""},
		"consume unknown":   {step("    consumes: [{artifact: letter, from_step: intake}]\n"), "steps[1].consumes[0].artifact", "does not produce"},
		"consume step":      {step("    consumes: [{artifact: letter, from_step: nope}]\n"), "steps[1].consumes[0].from_step", `no step "nope"`},
		"consume self":      {step("    produces: [{artifact: letter, deployment: docs}]\n    consumes: [{artifact: letter, from_step: posting}]\n"), "steps[1].consumes[0].from_step", "itself"},
		"consume no name":   {step("    consumes: [{from_step: intake}]\n"), "steps[1].consumes[0].artifact", ""},
		"produce name":      {step("    produces: [{artifact: 'my letter'}]\n"), "steps[1].produces[0].artifact", ""},
		"produce twice":     {step("    produces: [{artifact: a, deployment: docs}, {artifact: a, deployment: docs}]\n"), "steps[1].produces[1].artifact", "already produced"},
		"produce nowhere":   {step("    produces: [{artifact: a}]\n"), "steps[1].produces[0].deployment", "never the caller"},
		"run_min_tier":      {strings.Replace(step(""), "run_min_tier: 1", "run_min_tier: 5", 1), "policy.run_min_tier", "1 (independent system) to 4"},
		"cycle":             {strings.Replace(step("    after: [intake]\n"), "    risk: irreversible\n", "    risk: irreversible\n    after: [posting]\n", 1), "steps[0]", "cycle"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			we, ok := errors.AsType[*refusal.Error](err)
			if !ok || we.Path != tc.path {
				t.Fatalf("refused with %v, want the path %q", err, tc.path)
			}
			if !strings.Contains(we.Message, tc.says) {
				t.Fatalf("message %q does not say %q", we.Message, tc.says)
			}
		})
	}
}

// A secret parameter is never handed off.
func TestRunKeySecretHandoff(t *testing.T) {
	t.Parallel()
	doc := runHead + "  - step: login\n    enters: [pw]\n    handoffs: [{param: pw, from: {step: intake, effect: 0, field: id}}]\n" +
		"    effects:\n      - {kind: record_written, match: {name: {param: name}}, count_new_only: true}\n"
	_, err := Parse([]byte(doc))
	if we, ok := errors.AsType[*refusal.Error](err); !ok || we.Path != "steps[1].handoffs[0].param" || !strings.Contains(we.Message, "secret") {
		t.Fatalf("a secret handoff: %v", err)
	}
}

// TestIndependentKey: independent: true marks a step that a run lets
// begin while an earlier step stands RECONCILIATION_REQUIRED; absent, it
// is false; a value that is not a boolean is refused at its path.
func TestIndependentKey(t *testing.T) {
	t.Parallel()
	doc := runHead + "  - step: audit\n    independent: true\n    effects:\n      - {kind: record_written, match: {name: {param: name}}, count_new_only: true}\n"
	w, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	audit, _ := w.Step("audit")
	intake, _ := w.Step("intake")
	if !audit.Independent || intake.Independent {
		t.Fatalf("independent: audit %v intake %v; want true and the default false", audit.Independent, intake.Independent)
	}
	_, err = Parse([]byte(strings.Replace(doc, "independent: true", "independent: yes please", 1)))
	if we, ok := errors.AsType[*refusal.Error](err); !ok || we.Path != "steps[1].independent" {
		t.Fatalf("a non-boolean independent: %v; want a refusal at steps[1].independent", err)
	}
}

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Binding file schemas: ours, and the reference kit's, read the same way.
const (
	bindingSchema        = "verifierd.record-check-binding/v1"
	bindingSchemaCarried = "openadapt.record-check-binding/v1"
)

// binding is a loaded record-check binding file.
type binding struct {
	workflowName string
	sourcePin    string
	steps        []bindingStep
	// notCompared maps a parameter to the reason no contract compares it.
	notCompared map[string]string
	digest      string
}

type bindingStep struct {
	name      string
	intent    *string
	effects   []judge.Effect
	stepIndex int // in the workflow
	// What binding does to the step (checkBinding fills them): the
	// step's confirmed contracts are kept, its placeholders replaced, and
	// the binding's contracts appended, except one equal to a kept one.
	kept, replaced int
	added          []int // indexes into effects of the contracts appended
	final          []judge.Effect
}

// placeholderKind marks an effect that stands in for a contract nobody has
// written yet (a compiler's stub, or an author's "to do"): `{kind:
// placeholder}`, with any other keys. It is no contract: the judge knows
// no such kind, so a workflow holding one does not load in the daemon or in
// lint, and bind replaces it with the binding's contracts.
const placeholderKind = "placeholder"

// bindStepChange is what bind does to one bound step.
type bindStepChange struct {
	Step string `json:"step"`
	// Kept counts the step's own confirmed contracts, which stay first in
	// its effects; Replaced its placeholders, which are dropped; Added the
	// binding's contracts appended after the kept ones. AlreadyKept counts
	// the binding's contracts equal to a kept one, not added twice.
	Kept        int `json:"kept"`
	Replaced    int `json:"replaced"`
	Added       int `json:"added"`
	AlreadyKept int `json:"already_kept"`
}

// refusal is one reason a binding is refused, with its path in the binding
// file.
type bindRefusal struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// bindCoverage is, per bound step, which contracts compare each non-secret
// parameter the step enters, or why none does.
type bindCoverage struct {
	Fields      int                `json:"fields" yaml:"fields"`
	Compared    int                `json:"compared" yaml:"compared"`
	NotCompared int                `json:"not_compared" yaml:"not_compared"`
	Steps       []bindStepCoverage `json:"steps" yaml:"steps"`
}

type bindStepCoverage struct {
	Step   string          `json:"step" yaml:"step"`
	Fields []fieldCoverage `json:"fields" yaml:"fields"`
}

type fieldCoverage struct {
	Param string `json:"param" yaml:"param"`
	// ComparedBy lists the indexes of the step's effects that compare it.
	ComparedBy []int `json:"compared_by" yaml:"compared_by,flow"`
	// NotCompared is the reason from not_compared, when nothing compares it.
	NotCompared *string `json:"not_compared" yaml:"not_compared,omitempty"`
}

// bindReport is what `verifyctl bind` prints.
type bindReport struct {
	Workflow      string       `json:"workflow"`
	SourceDigest  string       `json:"source_digest"`
	BindingDigest string       `json:"binding_digest"`
	Coverage      bindCoverage `json:"coverage"`
	// Steps says, per bound step in the binding's order, what was kept,
	// replaced and added.
	Steps []bindStepChange `json:"steps"`
	// Written is the new workflow file, null with --check.
	Written *string `json:"written"`
}

func cmdBind(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bind", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wfPath := fs.String("workflow", "", "workflow file (verifierd.workflow/v1) whose steps have no contracts yet")
	bindPath := fs.String("binding", "", "record-check binding file (verifierd.record-check-binding/v1)")
	check := fs.Bool("check", false, "print the per-field coverage and write nothing")
	out := fs.String("out", "", "new workflow file to write (must not exist)")
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	if *wfPath == "" || *bindPath == "" || *check == (*out != "") || fs.NArg() > 0 {
		return usageError(stderr, "bind: needs --workflow FILE --binding FILE and one of --check or --out NEW_FILE")
	}
	if *out != "" {
		if _, err := os.Lstat(*out); err == nil {
			return refuseBinding(stdout, []bindRefusal{{Path: "--out", Message: fmt.Sprintf("%s exists; bind writes a new file and never overwrites one, so name a path that does not exist", *out)}})
		}
	}
	source, err := os.ReadFile(*wfPath)
	if err != nil {
		return workflowError(stdout, fmt.Errorf("reading the workflow file: %w", err))
	}
	w, placeholders, err := loadSource(source)
	if err != nil {
		return workflowError(stdout, fmt.Errorf("%s: %w", *wfPath, err))
	}
	data, err := os.ReadFile(*bindPath)
	if err != nil {
		return refuseBinding(stdout, []bindRefusal{{Path: "", Message: fmt.Sprintf("cannot read the binding file: %v", err)}})
	}
	b, cov, refusals := checkBinding(w, placeholders, data)
	if len(refusals) > 0 {
		return refuseBinding(stdout, refusals)
	}
	report := bindReport{Workflow: w.Name, SourceDigest: w.Digest, BindingDigest: b.digest, Coverage: cov, Steps: []bindStepChange{}}
	for _, bs := range b.steps {
		report.Steps = append(report.Steps, bindStepChange{Step: bs.name, Kept: bs.kept, Replaced: bs.replaced,
			Added: len(bs.added), AlreadyKept: len(bs.effects) - len(bs.added)})
	}
	if *out != "" {
		bound, err := boundWorkflow(source, data, b, cov)
		if err != nil {
			return refuseBinding(stdout, []bindRefusal{{Path: "", Message: err.Error()}})
		}
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return refuseBinding(stdout, []bindRefusal{{Path: "--out", Message: fmt.Sprintf("cannot create the new workflow file: %v", err)}})
		}
		if _, err := f.Write(bound); err != nil {
			f.Close()
			os.Remove(*out)
			fmt.Fprintln(stderr, "verifyctl: writing", *out+":", err)
			return exitFailure
		}
		if err := f.Close(); err != nil {
			os.Remove(*out)
			fmt.Fprintln(stderr, "verifyctl: writing", *out+":", err)
			return exitFailure
		}
		report.Written = out
	}
	writeJSON(stdout, report)
	return exitOK
}

// refuseBinding prints the first refusal in the client commands' JSON error
// shape, and every refusal under "refusals".
func refuseBinding(stdout io.Writer, rs []bindRefusal) int {
	writeJSON(stdout, map[string]any{
		"error":    map[string]any{"code": "BINDING_REFUSED", "message": rs[0].Message, "path": rs[0].Path},
		"refusals": rs,
	})
	return exitInvalid
}

// bindingDoc is a binding file as written, for the strict decoder
// (sdk/unstable/strict, through workflow.Decode): its fields are the file's keys,
// so an unknown key names the keys allowed and the nearest one. A null
// optional key is absent.
type bindingDoc struct {
	Schema              string            `json:"schema"`
	WorkflowName        string            `json:"workflow_name"`
	SourceContentDigest *string           `json:"source_content_digest"`
	Steps               []bindingStepDoc  `json:"steps"`
	NotCompared         map[string]string `json:"not_compared"`
}

type bindingStepDoc struct {
	Step    string  `json:"step"`
	Intent  *string `json:"intent"`
	Effects []any   `json:"effects"`
}

// parseBinding reads a binding file's structure. Paths are the binding
// file's.
func parseBinding(data []byte) (*binding, error) {
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		return nil, &refusal.Error{Path: "", Message: fmt.Sprintf("cannot parse the binding file: %v", err)}
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, &refusal.Error{Path: "", Message: "a binding file is a map with schema, workflow_name, steps and not_compared"}
	}
	var doc bindingDoc
	if err := workflow.Decode(tree, "", &doc); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := &binding{notCompared: map[string]string{}, digest: "sha256:" + hex.EncodeToString(sum[:]), workflowName: doc.WorkflowName}
	if doc.Schema != bindingSchema && doc.Schema != bindingSchemaCarried {
		return nil, &refusal.Error{Path: "schema", Message: fmt.Sprintf("must be %q, got %q", bindingSchema, doc.Schema)}
	}
	if b.workflowName == "" {
		return nil, &refusal.Error{Path: "workflow_name", Message: "name the workflow this binding is for (its name: key)"}
	}
	if doc.SourceContentDigest != nil {
		if *doc.SourceContentDigest == "" {
			return nil, &refusal.Error{Path: "source_content_digest", Message: "must be the workflow file's digest, sha256:<hex>, or absent"}
		}
		b.sourcePin = *doc.SourceContentDigest
	}
	for _, p := range slices.Sorted(maps.Keys(doc.NotCompared)) {
		if strings.TrimSpace(doc.NotCompared[p]) == "" {
			return nil, &refusal.Error{Path: "not_compared." + p, Message: "give the reason no contract compares this parameter, as text"}
		}
		b.notCompared[p] = doc.NotCompared[p]
	}
	if len(doc.Steps) == 0 {
		return nil, &refusal.Error{Path: "steps", Message: "give a non-empty list of {step, intent, effects}"}
	}
	for i, sd := range doc.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		if sd.Step == "" {
			return nil, &refusal.Error{Path: path + ".step", Message: "name the workflow step to bind"}
		}
		if len(sd.Effects) == 0 {
			return nil, &refusal.Error{Path: path + ".effects", Message: "give a non-empty list of effect contracts"}
		}
		effects, err := judge.LoadEffects(sd.Effects, path+".effects")
		if err != nil {
			return nil, err
		}
		b.steps = append(b.steps, bindingStep{name: sd.Step, intent: sd.Intent, effects: effects})
	}
	return b, nil
}

// isPlaceholder reports whether an effect, as decoded, is a placeholder.
func isPlaceholder(e any) bool {
	m, ok := e.(map[string]any)
	return ok && m["kind"] == placeholderKind
}

// loadSource reads the workflow file to bind. Its placeholders are set
// aside first (the rest must load as a workflow) and counted per step
// index; Digest stays the digest of the file's own bytes.
func loadSource(source []byte) (*workflow.Workflow, map[int]int, error) {
	placeholders := map[int]int{}
	tree, err := judge.DecodeDocument(source)
	m, isMap := tree.(map[string]any)
	steps, hasSteps := m["steps"].([]any)
	if err != nil || !isMap || !hasSteps {
		w, err := workflow.Parse(source) // refused with its own path
		return w, placeholders, err
	}
	for i, st := range steps {
		sm, _ := st.(map[string]any)
		effects, _ := sm["effects"].([]any)
		var confirmed []any
		for _, e := range effects {
			if isPlaceholder(e) {
				placeholders[i]++
			} else {
				confirmed = append(confirmed, e)
			}
		}
		switch {
		case placeholders[i] == 0:
		case len(confirmed) == 0:
			delete(sm, "effects")
		default:
			sm["effects"] = confirmed
		}
	}
	if len(placeholders) == 0 {
		w, err := workflow.Parse(source)
		return w, placeholders, err
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	w, err := workflow.Parse(rest)
	if err != nil {
		return nil, nil, err
	}
	w.Digest = workflowDigest(source)
	return w, placeholders, nil
}

// checkBinding loads a binding and checks it against the workflow, whose
// placeholders loadSource counted per step index. It returns every refusal
// it finds, so that one --check shows them all.
func checkBinding(w *workflow.Workflow, placeholders map[int]int, data []byte) (*binding, bindCoverage, []bindRefusal) {
	cov := bindCoverage{Steps: []bindStepCoverage{}}
	b, err := parseBinding(data)
	if err != nil {
		if r, ok := refusal.As(err); ok {
			return nil, cov, []bindRefusal{{Path: r.Path, Message: r.Message}}
		}
		return nil, cov, []bindRefusal{{Message: err.Error()}}
	}
	var rs []bindRefusal
	add := func(path, format string, args ...any) {
		rs = append(rs, bindRefusal{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if b.workflowName != w.Name {
		add("workflow_name", "the binding is for workflow %q but the workflow file is %q; bind the workflow it was reviewed for", b.workflowName, w.Name)
	}
	if b.sourcePin != "" && b.sourcePin != w.Digest {
		add("source_content_digest", "the binding pins source %s but the workflow file is %s: the workflow changed since the binding was reviewed; review the binding against this file and update the pin", b.sourcePin, w.Digest)
	}
	if w.Binding != nil {
		add("", "the workflow file already records a binding (binding_digest %s); bind the original source with one binding that names every step", w.Binding.BindingDigest)
	}
	secret := w.SecretParams()
	policy := workflow.Resolve(w.Policy)
	names := slices.Sorted(maps.Keys(b.notCompared))
	for _, p := range names {
		if _, ok := w.Params[p]; !ok {
			add("not_compared."+p, "parameter %q is not declared in the workflow's params", p)
		} else if secret[p] {
			add("not_compared."+p, "parameter %q is secret: no contract may compare it, so it needs no entry; remove it", p)
		}
	}
	seen := map[string]int{}
	for i := range b.steps {
		bs := &b.steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		if prev, dup := seen[bs.name]; dup {
			add(path+".step", "step %q is already bound by steps[%d]; give each step once, with all its contracts", bs.name, prev)
			continue
		}
		seen[bs.name] = i
		if sc, ok := bindStep(w, b, bs, path, placeholders, secret, policy, &cov, add); ok {
			cov.Steps = append(cov.Steps, sc)
		}
	}
	// A placeholder the binding leaves in place would be written into a
	// workflow that cannot load.
	for _, i := range slices.Sorted(maps.Keys(placeholders)) {
		if !slices.ContainsFunc(b.steps, func(bs bindingStep) bool { return bs.stepIndex == i }) {
			add("steps", "workflow step %q holds %d placeholder contract(s) (kind: placeholder) and the binding does not bind it; a placeholder is no contract and a workflow holding one does not load, so bind that step too", w.Steps[i].Name, placeholders[i])
		}
	}
	return b, cov, rs
}

func hasParam(w *workflow.Workflow, p string) bool {
	_, ok := w.Params[p]
	return ok
}

// boundWorkflow writes the new workflow file: the source document with each
// bound step's effects taken from the binding file as written, and a
// binding block. Both files are edited as YAML node trees so that the
// source's order and comments survive.
func boundWorkflow(source, bindingData []byte, b *binding, cov bindCoverage) ([]byte, error) {
	var doc, bdoc yaml.Node
	if err := yaml.Unmarshal(source, &doc); err != nil {
		return nil, fmt.Errorf("re-reading the workflow file: %w", err)
	}
	if err := yaml.Unmarshal(bindingData, &bdoc); err != nil {
		return nil, fmt.Errorf("re-reading the binding file: %w", err)
	}
	root, broot := docRoot(&doc), docRoot(&bdoc)
	if root.Style&yaml.FlowStyle != 0 {
		// A JSON (or flow-style) source: the new file is YAML in block style,
		// not one long flow line.
		blockStyle(root)
	}
	wsteps, bsteps := mapValue(root, "steps"), mapValue(broot, "steps")
	if wsteps == nil || bsteps == nil || wsteps.Kind != yaml.SequenceNode || bsteps.Kind != yaml.SequenceNode {
		return nil, errors.New("the workflow or binding file has no steps list as YAML")
	}
	for i, bs := range b.steps {
		if bs.stepIndex >= len(wsteps.Content) || i >= len(bsteps.Content) {
			return nil, errors.New("the steps lists changed while binding")
		}
		effects := mapValue(bsteps.Content[i], "effects")
		if effects == nil || effects.Kind != yaml.SequenceNode || len(effects.Content) != len(bs.effects) {
			return nil, fmt.Errorf("steps[%d] has no effects as YAML", i)
		}
		wstep := wsteps.Content[bs.stepIndex]
		if bs.kept == 0 && bs.replaced == 0 {
			setMapValue(wstep, "effects", effects)
			continue
		}
		// The kept contracts as the source wrote them, then the added
		// ones as the binding wrote them.
		merged := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if own := mapValue(wstep, "effects"); own != nil {
			for _, e := range own.Content {
				if !isPlaceholderNode(e) {
					merged.Content = append(merged.Content, e)
				}
			}
		}
		for _, j := range bs.added {
			merged.Content = append(merged.Content, effects.Content[j])
		}
		setMapValue(wstep, "effects", merged)
	}
	block := struct {
		BindingDigest string       `yaml:"binding_digest"`
		SourceDigest  string       `yaml:"source_digest"`
		Coverage      bindCoverage `yaml:"coverage"`
	}{b.digest, workflowDigest(source), cov}
	var bnode yaml.Node
	if err := bnode.Encode(block); err != nil {
		return nil, err
	}
	bnode.Style = 0
	setMapValue(root, "binding", &bnode)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// What was written must read back as a workflow with the contracts.
	got, err := workflow.Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the bound workflow does not load (%v); report this", err)
	}
	for _, bs := range b.steps {
		if len(got.Steps[bs.stepIndex].Effects) != len(bs.final) {
			return nil, fmt.Errorf("the bound workflow lost contracts of step %q; report this", bs.name)
		}
	}
	return buf.Bytes(), nil
}

func workflowDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode {
		// JSON quotes every string; YAML quotes only where it must.
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func docRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return doc
}

// isPlaceholderNode reports whether an effect node is a placeholder.
func isPlaceholderNode(n *yaml.Node) bool {
	k := mapValue(n, "kind")
	return k != nil && k.Kind == yaml.ScalarNode && k.Value == placeholderKind
}

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setMapValue replaces the value of key in a mapping node, or appends the
// key.
func setMapValue(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// bindStep checks one step of the binding against workflow step bs.name,
// sets its final contracts (bs.final, kept, replaced, added) and adds its
// refusals; it answers the step's field coverage, and false when the
// workflow has no such step.
func bindStep(w *workflow.Workflow, b *binding, bs *bindingStep, path string, placeholders map[int]int, secret map[string]bool, policy workflow.Effective, cov *bindCoverage, add func(path, format string, args ...any)) (bindStepCoverage, bool) {
	bs.stepIndex = slices.IndexFunc(w.Steps, func(s workflow.Step) bool { return s.Name == bs.name })
	if bs.stepIndex < 0 {
		add(path+".step", "the workflow has no step %q", bs.name)
		return bindStepCoverage{}, false
	}
	ws := w.Steps[bs.stepIndex]
	if bs.intent != nil && *bs.intent != ws.Intent {
		add(path+".intent", "the guard expects intent %q but step %q now reads %q: the workflow was recompiled; review the binding against the new step", *bs.intent, bs.name, ws.Intent)
	}
	// The step's confirmed contracts stay, first; its placeholders go;
	// the binding's contracts follow, but one equal to a kept contract
	// is not added twice. finalIndex is each binding contract's index
	// in the step's new effects.
	bs.kept, bs.replaced = len(ws.Effects), placeholders[bs.stepIndex]
	bs.final = slices.Clone(ws.Effects)
	finalIndex := make([]int, len(bs.effects))
	for j, e := range bs.effects {
		if k := slices.IndexFunc(ws.Effects, func(kept judge.Effect) bool { return reflect.DeepEqual(kept, e) }); k >= 0 {
			finalIndex[j] = k
			continue
		}
		finalIndex[j] = len(bs.final)
		bs.added = append(bs.added, j)
		bs.final = append(bs.final, e)
	}
	if !workflow.HasChangeClaim(bs.final) {
		add(path+".effects", "no contract claims a change (a record_written with count_new_only: true expecting at least one record, or an exact_new_set with at least one member), neither the binding's nor one the step keeps, so an automation that did nothing would pass; add one")
	}
	// The workflow's own subject_params apply to the bound contracts, so
	// that what bind writes lints clean. A contract that selects through
	// no parameter at all is refused once, below.
	for _, f := range workflow.CheckContracts(policy.ForStep(&ws), bs.effects, secret, path+".effects") {
		if f.Code == workflow.CodeSubjectNotSelected && len(workflow.SelectorParams(bs.effects[f.Effect])) > 0 {
			add(f.Path, "%s", f.Message)
		}
	}
	compared := map[string][]int{}
	for k, e := range ws.Effects {
		for _, p := range slices.Sorted(maps.Keys(workflow.ReferencedParams(e))) {
			if !secret[p] && hasParam(w, p) {
				compared[p] = append(compared[p], k)
			}
		}
	}
	for j, e := range bs.effects {
		epath := fmt.Sprintf("%s.effects[%d]", path, j)
		if (e.Kind == judge.RecordWritten || e.Kind == judge.FieldEquals || e.Kind == judge.ExactNewSet) && len(workflow.SelectorParams(e)) == 0 {
			where := "match"
			if e.Kind == judge.ExactNewSet {
				where = "new_records"
			}
			add(epath+"."+where, "a %s must select its records through a run parameter, or another run's record would pass; write e.g. match: {code: {param: claim_no}}", e.Kind)
		}
		refs := workflow.ReferencedParams(e)
		params := slices.Sorted(maps.Keys(refs))
		for _, p := range params {
			switch {
			case secret[p]:
				add(epath, "the contract references the secret parameter %q; a contract is hashed, stored and shown as evidence, so compare a non-secret field instead", p)
			case !hasParam(w, p):
				add(epath, "the contract references %q, which the workflow's params do not declare", p)
			case slices.Contains(bs.added, j):
				compared[p] = append(compared[p], finalIndex[j])
			}
		}
	}
	return stepCoverage(b, bs, ws, path, secret, compared, cov, add), true
}

// stepCoverage is the coverage of the fields step ws enters: compared by
// a contract, listed under not_compared, or refused.
func stepCoverage(b *binding, bs *bindingStep, ws workflow.Step, path string, secret map[string]bool, compared map[string][]int, cov *bindCoverage, add func(path, format string, args ...any)) bindStepCoverage {
	sc := bindStepCoverage{Step: bs.name, Fields: []fieldCoverage{}}
	for _, p := range ws.Enters {
		if secret[p] || slices.ContainsFunc(sc.Fields, func(f fieldCoverage) bool { return f.Param == p }) {
			continue
		}
		fc := fieldCoverage{Param: p, ComparedBy: compared[p]}
		cov.Fields++
		switch reason, listed := b.notCompared[p]; {
		case len(fc.ComparedBy) > 0:
			cov.Compared++
		case listed:
			fc.NotCompared = &reason
			cov.NotCompared++
		default:
			add(path+".effects", "step %q enters %q but no contract compares it; compare it (e.g. a field_equals with value: {param: %s}) or list it under not_compared with the reason", bs.name, p, p)
		}
		if fc.ComparedBy == nil {
			fc.ComparedBy = []int{}
		}
		sc.Fields = append(sc.Fields, fc)
	}
	return sc
}

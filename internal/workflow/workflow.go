// Package workflow reads the operator's reviewed workflow files
// (schema verifierd.workflow/v1): the run parameters a workflow enters, which
// of them are secret, and per step the effect contracts that prove it. A
// registered workflow is how the operator, not the caller, decides what
// counts as proof for a step. It also holds the contract guards (Policy)
// that the daemon config, a deployment or a workflow may set.
package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// Schema is the only workflow schema this daemon reads.
const Schema = "verifierd.workflow/v1"

// Risk labels a step.
const (
	RiskIrreversible = "irreversible"
	RiskReversible   = "reversible"
	RiskReadOnly     = "read_only"
)

// Workflow is a loaded workflow file.
type Workflow struct {
	Name string
	// Params are the run parameters the workflow knows, by name.
	Params map[string]Param
	Steps  []Step
	// Policy is the workflow's own policy block (nil when absent). It
	// applies to this workflow's steps only.
	Policy *Policy
	// Digest is "sha256:" + hex SHA-256 of the file's bytes: what a session
	// records as the reviewed source of its contracts.
	Digest string
	// Binding is the record `verifyctl bind` leaves in the file it writes
	// (nil when absent).
	Binding *Binding
}

// Binding records that reviewed contracts were attached to a workflow that
// had none (`verifyctl bind`): which binding file, which source, and the
// per-field coverage it had. It certifies nothing by itself.
type Binding struct {
	// BindingDigest is "sha256:" + hex SHA-256 of the binding file's bytes.
	BindingDigest string
	// SourceDigest is the Digest of the workflow file that was bound.
	SourceDigest string
	// Coverage is the coverage as written (a map), kept for review.
	Coverage map[string]any
}

// Param is one declared run parameter.
type Param struct {
	Secret bool
}

// Step is one step of a workflow.
type Step struct {
	Name   string
	Intent string
	Risk   string
	// Enters lists the parameters the step types into the application.
	Enters []string
	// SubjectParams, when set (non-nil, possibly empty), replace the
	// policy's subject_params for this step (Effective.ForStep).
	SubjectParams []string
	// Effects are the step's contracts, loaded (not bound).
	Effects []judge.Effect
	// EffectsTree is the decoded effects list, as written, for re-emitting
	// the contracts (verifyctl bind) and for the session's stored copy.
	EffectsTree []any
	// After, Handoffs, Consumes and Produces order the step in a run
	// (run.go); all empty for a step that only stands alone.
	After    []string
	Handoffs []Handoff
	Consumes []Consume
	Produces []string
	// ProducedAt maps each produced artifact to the registered
	// document-hash or file deployment its run checks read: the workflow
	// says where, never the caller.
	ProducedAt map[string]string
	// Independent (independent: true): the step does not rest on the
	// steps before it in the workflow, so one of them standing
	// RECONCILIATION_REQUIRED does not stop its Begin in a run
	// (reconciliation_pending). after:, handoffs and consumes still apply.
	Independent bool
}

// Step returns the step named name.
func (w *Workflow) Step(name string) (*Step, bool) {
	for i := range w.Steps {
		if w.Steps[i].Name == name {
			return &w.Steps[i], true
		}
	}
	return nil, false
}

// Irreversible reports whether the step is irreversible: its own risk, or
// any of its effects' risk.
func (s *Step) Irreversible() bool {
	if s.Risk == RiskIrreversible {
		return true
	}
	for _, e := range s.Effects {
		if e.Risk == judge.Irreversible {
			return true
		}
	}
	return false
}

// SecretParams returns the names of the parameters marked secret.
func (w *Workflow) SecretParams() map[string]bool {
	out := map[string]bool{}
	for name, p := range w.Params {
		if p.Secret {
			out[name] = true
		}
	}
	return out
}

func refuse(path, format string, args ...any) error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// DecodeMap reads a YAML or JSON document whose top level is a map: a
// document that does not parse, or is not a map, is refused at path, the
// second with shape, which says what the map holds.
func DecodeMap(data []byte, path, shape string) (map[string]any, error) {
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		return nil, refuse(path, "cannot parse: %v", err)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, refuse(path, "%s", shape)
	}
	return m, nil
}

// ReadFile reads the file at path and parses it with parse. what names the
// file in an error reading it ("workflow file"); parse's refusal is
// prefixed with path.
func ReadFile[T any](path, what string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("reading the %s: %w", what, err)
	}
	v, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Load reads and checks a workflow file.
func Load(path string) (*Workflow, error) {
	return ReadFile(path, "workflow file", Parse)
}

// workflowDoc is a workflow file as written, for the strict decoder
// (sdk/unstable/strict): its fields are the file's keys. policy and binding are
// read by ParsePolicy and parseBinding.
type workflowDoc struct {
	Schema  string               `json:"schema"`
	Name    string               `json:"name"`
	Params  map[string]*paramDoc `json:"params"`
	Steps   []stepDoc            `json:"steps"`
	Policy  any                  `json:"policy"`
	Binding any                  `json:"binding"`
}

type paramDoc struct {
	Secret bool `json:"secret"`
}

// stepDoc is one step as written; null for an optional key is absent.
type stepDoc struct {
	Step          string       `json:"step"`
	Intent        *string      `json:"intent"`
	Risk          any          `json:"risk"`
	Enters        []string     `json:"enters"`
	SubjectParams any          `json:"subject_params"`
	Effects       []any        `json:"effects"`
	After         []string     `json:"after"`
	Handoffs      []handoffDoc `json:"handoffs"`
	Consumes      []consumeDoc `json:"consumes"`
	Produces      []produceDoc `json:"produces"`
	Independent   *bool        `json:"independent"`
}

type bindingDoc struct {
	BindingDigest string         `json:"binding_digest"`
	SourceDigest  string         `json:"source_digest"`
	Coverage      map[string]any `json:"coverage"`
}

// Decode walks a decoded YAML or JSON tree into v (a pointer to a struct
// whose json tags are the keys) with the strict decoder: an unknown key is
// refused with the keys allowed there and the one probably meant, a value
// of the wrong type with the type it must be. path names tree. Every
// refusal is an *refusal.Error (a type that reads its own subtree may refuse with
// one of its own).
func Decode(tree any, path string, v any) error {
	return strict.DecodeRefusal(tree, path, v, "")
}

// Parse reads a workflow document (YAML or JSON).
func Parse(data []byte) (*Workflow, error) {
	m, err := DecodeMap(data, "workflow", "must be a map with schema, name, params and steps")
	if err != nil {
		return nil, err
	}
	var doc workflowDoc
	if err := Decode(m, "", &doc); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	w := &Workflow{Params: map[string]Param{}, Digest: "sha256:" + hex.EncodeToString(sum[:])}
	if doc.Schema != Schema {
		return nil, refuse("schema", "must be %q, got %q", Schema, doc.Schema)
	}
	if doc.Name == "" {
		return nil, refuse("name", "give the workflow a non-empty name")
	}
	w.Name = doc.Name
	for _, pname := range slices.Sorted(maps.Keys(doc.Params)) {
		if !validName(pname) {
			return nil, refuse("params."+pname, "a parameter name is letters, digits and _ (starting with a letter or _)")
		}
		var p Param
		if pd := doc.Params[pname]; pd != nil {
			p.Secret = pd.Secret
		}
		w.Params[pname] = p
	}
	if doc.Policy != nil {
		if w.Policy, err = ParsePolicy(doc.Policy, "policy"); err != nil {
			return nil, err
		}
	}
	if doc.Binding != nil {
		if w.Binding, err = parseBinding(doc.Binding); err != nil {
			return nil, err
		}
	}
	if len(doc.Steps) == 0 {
		return nil, refuse("steps", "give a non-empty list of steps")
	}
	seen := map[string]bool{}
	for i, sd := range doc.Steps {
		s, err := parseStep(sd, fmt.Sprintf("steps[%d]", i), w.Params)
		if err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, refuse(fmt.Sprintf("steps[%d].step", i), "step %q is declared twice; step names are unique", s.Name)
		}
		seen[s.Name] = true
		w.Steps = append(w.Steps, s)
	}
	if err := w.checkRunKeys(doc.Steps); err != nil {
		return nil, err
	}
	return w, nil
}

// parseStep checks one decoded step: its name, risk, the declared
// parameters it enters, and its effect contracts.
func parseStep(sd stepDoc, path string, params map[string]Param) (Step, error) {
	s := Step{Name: sd.Step, Risk: RiskReversible}
	if s.Name == "" {
		return s, refuse(path+".step", "give the step a non-empty name")
	}
	if sd.Intent != nil {
		s.Intent = *sd.Intent
	}
	if sd.Independent != nil {
		s.Independent = *sd.Independent
	}
	if sd.Risk != nil {
		str, _ := sd.Risk.(string)
		switch str {
		case RiskIrreversible, RiskReversible, RiskReadOnly:
			s.Risk = str
		default:
			return s, refuse(path+".risk", "must be irreversible, reversible or read_only, got %v", sd.Risk)
		}
	}
	for j, name := range sd.Enters {
		if _, known := params[name]; !known {
			return s, refuse(fmt.Sprintf("%s.enters[%d]", path, j), "parameter %q is not declared under params:", name)
		}
		s.Enters = append(s.Enters, name)
	}
	if sd.SubjectParams != nil {
		list, err := parseSubjectParams(sd.SubjectParams, path+".subject_params")
		if err != nil {
			return s, err
		}
		s.SubjectParams = list
	}
	if sd.Effects != nil {
		effects, err := judge.LoadEffects(sd.Effects, path+".effects")
		if err != nil {
			return s, err
		}
		s.Effects = effects
		s.EffectsTree = sd.Effects
	}
	return s, nil
}

func parseBinding(raw any) (*Binding, error) {
	if _, ok := raw.(map[string]any); !ok {
		return nil, refuse("binding", "must be a map with %s", strings.Join(strict.Keys(reflect.TypeFor[bindingDoc]()), ", "))
	}
	var doc bindingDoc
	if err := Decode(raw, "binding", &doc); err != nil {
		return nil, err
	}
	for _, d := range []struct{ key, value string }{{"binding_digest", doc.BindingDigest}, {"source_digest", doc.SourceDigest}} {
		if !isDigest(d.value) {
			return nil, refuse("binding."+d.key, "must be sha256: followed by 64 lowercase hex digits, got %q", d.value)
		}
	}
	return &Binding{BindingDigest: doc.BindingDigest, SourceDigest: doc.SourceDigest, Coverage: doc.Coverage}, nil
}

func isDigest(s string) bool {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, r := range hexPart {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckKeys refuses a key of m outside allowed, naming its path (under
// path), the keys allowed there and the one probably meant, as Decode
// does. Keys are checked in sorted order, so the refusal is the same on
// every run.
func CheckKeys(m map[string]any, allowed []string, path string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			se := strict.UnknownKey(path, k, allowed)
			return &refusal.Error{Path: se.Path, Message: se.Message}
		}
	}
	return nil
}

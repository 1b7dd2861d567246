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
	"slices"
	"strings"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
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

// Error is a refusal naming the path in the file and the fix: the SDK's
// one refusal (refusal.Error).
type Error = refusal.Error

func refuse(path, format string, args ...any) error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
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

// Load reads and checks a workflow file.
func Load(path string) (*Workflow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the workflow file: %w", err)
	}
	w, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

var workflowKeys = []string{"schema", "name", "params", "steps", "policy", "binding"}
var bindingKeys = []string{"binding_digest", "source_digest", "coverage"}
var stepKeys = []string{"step", "intent", "risk", "enters", "subject_params", "effects"}
var paramKeys = []string{"secret"}

// Parse reads a workflow document (YAML or JSON).
func Parse(data []byte) (*Workflow, error) {
	m, err := DecodeMap(data, "workflow", "must be a map with schema, name, params and steps")
	if err != nil {
		return nil, err
	}
	if err := CheckKeys(m, workflowKeys, ""); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	w := &Workflow{Params: map[string]Param{}, Digest: "sha256:" + hex.EncodeToString(sum[:])}
	if s, _ := m["schema"].(string); s != Schema {
		return nil, refuse("schema", "must be %q, got %v", Schema, m["schema"])
	}
	name, ok := m["name"].(string)
	if !ok || name == "" {
		return nil, refuse("name", "give the workflow a non-empty name")
	}
	w.Name = name
	if raw, present := m["params"]; present && raw != nil {
		pm, ok := raw.(map[string]any)
		if !ok {
			return nil, refuse("params", "must be a map of parameter name to {secret: bool}")
		}
		for pname, pv := range pm {
			path := "params." + pname
			if !validName(pname) {
				return nil, refuse(path, "a parameter name is letters, digits and _ (starting with a letter or _)")
			}
			var p Param
			if pv != nil {
				pvm, ok := pv.(map[string]any)
				if !ok {
					return nil, refuse(path, "must be a map, e.g. {} or {secret: true}")
				}
				if err := CheckKeys(pvm, paramKeys, path); err != nil {
					return nil, err
				}
				if s, present := pvm["secret"]; present {
					b, ok := s.(bool)
					if !ok {
						return nil, refuse(path+".secret", "must be true or false")
					}
					p.Secret = b
				}
			}
			w.Params[pname] = p
		}
	}
	if raw, present := m["policy"]; present && raw != nil {
		p, err := ParsePolicy(raw, "policy")
		if err != nil {
			return nil, err
		}
		w.Policy = p
	}
	if raw, present := m["binding"]; present && raw != nil {
		b, err := parseBinding(raw)
		if err != nil {
			return nil, err
		}
		w.Binding = b
	}
	steps, ok := m["steps"].([]any)
	if !ok || len(steps) == 0 {
		return nil, refuse("steps", "give a non-empty list of steps")
	}
	seen := map[string]bool{}
	for i, raw := range steps {
		path := fmt.Sprintf("steps[%d]", i)
		sm, ok := raw.(map[string]any)
		if !ok {
			return nil, refuse(path, "a step must be a map with step, risk and effects")
		}
		if err := CheckKeys(sm, stepKeys, path); err != nil {
			return nil, err
		}
		var s Step
		s.Name, _ = sm["step"].(string)
		if s.Name == "" {
			return nil, refuse(path+".step", "give the step a non-empty name")
		}
		if seen[s.Name] {
			return nil, refuse(path+".step", "step %q is declared twice; step names are unique", s.Name)
		}
		seen[s.Name] = true
		if v, present := sm["intent"]; present && v != nil {
			str, ok := v.(string)
			if !ok {
				return nil, refuse(path+".intent", "must be text")
			}
			s.Intent = str
		}
		s.Risk = RiskReversible
		if v, present := sm["risk"]; present && v != nil {
			str, _ := v.(string)
			switch str {
			case RiskIrreversible, RiskReversible, RiskReadOnly:
				s.Risk = str
			default:
				return nil, refuse(path+".risk", "must be irreversible, reversible or read_only, got %v", v)
			}
		}
		if v, present := sm["enters"]; present && v != nil {
			list, ok := v.([]any)
			if !ok {
				return nil, refuse(path+".enters", "must be a list of parameter names")
			}
			for j, e := range list {
				str, ok := e.(string)
				if !ok {
					return nil, refuse(fmt.Sprintf("%s.enters[%d]", path, j), "must be a parameter name")
				}
				if _, known := w.Params[str]; !known {
					return nil, refuse(fmt.Sprintf("%s.enters[%d]", path, j), "parameter %q is not declared under params:", str)
				}
				s.Enters = append(s.Enters, str)
			}
		}
		if v, present := sm["subject_params"]; present && v != nil {
			list, err := parseSubjectParams(v, path+".subject_params")
			if err != nil {
				return nil, err
			}
			s.SubjectParams = list
		}
		if v, present := sm["effects"]; present && v != nil {
			list, ok := v.([]any)
			if !ok {
				return nil, refuse(path+".effects", "must be a list of effect contracts")
			}
			effects, err := judge.LoadEffects(list, path+".effects")
			if err != nil {
				return nil, err
			}
			s.Effects = effects
			s.EffectsTree = list
		}
		w.Steps = append(w.Steps, s)
	}
	return w, nil
}

func parseBinding(raw any) (*Binding, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, refuse("binding", "must be a map with %s", strings.Join(bindingKeys, ", "))
	}
	if err := CheckKeys(m, bindingKeys, "binding"); err != nil {
		return nil, err
	}
	b := &Binding{}
	for _, key := range []string{"binding_digest", "source_digest"} {
		s, _ := m[key].(string)
		if !isDigest(s) {
			return nil, refuse("binding."+key, "must be sha256: followed by 64 lowercase hex digits, got %v", m[key])
		}
		if key == "binding_digest" {
			b.BindingDigest = s
		} else {
			b.SourceDigest = s
		}
	}
	if v, present := m["coverage"]; present && v != nil {
		cov, ok := v.(map[string]any)
		if !ok {
			return nil, refuse("binding.coverage", "must be a map (the coverage verifyctl bind recorded)")
		}
		b.Coverage = cov
	}
	return b, nil
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
// path) and the keys allowed there. Keys are checked in sorted order, so the
// refusal is the same on every run.
func CheckKeys(m map[string]any, allowed []string, path string) error {
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			return refuse(p, "unknown key; the keys here are %s", strings.Join(allowed, ", "))
		}
	}
	return nil
}

package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// Policy holds the contract guards. A nil field inherits from the layer
// below: the daemon config's `policy:` is the base, a registered deployment's
// `policy:` overrides it, and a workflow's `policy:` overrides both for that
// workflow's steps. One key layers otherwise: min_settle_s is a floor, and
// the largest value any layer sets applies (a deployment or workflow may
// lengthen the daemon's settle floor, never shorten it). All three are the
// operator's files; a caller never sends a policy.
type Policy struct {
	// RequireRegisteredContracts refuses caller-supplied effects: a Begin
	// must name a registered workflow step.
	RequireRegisteredContracts *bool
	// RequireChangeClaim refuses a step whose effects make no claim of
	// change (no record_written with count_new_only, no exact_new_set).
	RequireChangeClaim *bool
	// SubjectParams must each be bound through a selector of every
	// record_written, field_equals and exact_new_set.
	SubjectParams []string
	// subjectSet is true when subject_params was written (possibly empty).
	subjectSet bool
	// MinTier is the weakest tier (1 strongest .. 4 weakest) a selected
	// candidate may have.
	MinTier *int
	// RequireProvenNewness refuses a change claim whose selected candidate
	// reads a narrowed collection with neither a census nor a newness:
	// declaration (CheckNewness).
	RequireProvenNewness *bool
	// MinSettleS is the settle floor in seconds: every change claim of a
	// step with an irreversible effect keeps reading at least this long
	// after its first CONFIRMED, so a late duplicate is caught.
	MinSettleS *float64
	// RunMinTier is the weakest tier (1 strongest .. 4 weakest) a step may
	// have for its run to be VERIFIED (the run classifier, internal/run).
	RunMinTier *int
	// RunMinRung is the lowest oracle rung (0 visual .. 3 counterparty,
	// internal/oracle) a step may have for its run to be VERIFIED.
	RunMinRung *int
}

// policyDoc is a policy: block as written, for the strict decoder; a
// null key inherits, as an absent one does.
type policyDoc struct {
	RequireRegisteredContracts *bool `json:"require_registered_contracts"`
	RequireChangeClaim         *bool `json:"require_change_claim"`
	SubjectParams              any   `json:"subject_params"`
	MinTier                    any   `json:"min_tier"`
	RequireProvenNewness       *bool `json:"require_proven_newness"`
	MinSettleS                 any   `json:"min_settle_s"`
	RunMinTier                 any   `json:"run_min_tier"`
	RunMinRung                 any   `json:"run_min_rung"`
}

// ParsePolicy loads a decoded `policy:` block.
func ParsePolicy(tree any, path string) (*Policy, error) {
	if _, ok := tree.(map[string]any); !ok {
		return nil, refuse(path, "must be a map with any of %s", strings.Join(strict.Keys(reflect.TypeFor[policyDoc]()), ", "))
	}
	var doc policyDoc
	if err := Decode(tree, path, &doc); err != nil {
		return nil, err
	}
	p := &Policy{
		RequireRegisteredContracts: doc.RequireRegisteredContracts,
		RequireChangeClaim:         doc.RequireChangeClaim,
		RequireProvenNewness:       doc.RequireProvenNewness,
	}
	if doc.SubjectParams != nil {
		list, err := parseSubjectParams(doc.SubjectParams, path+".subject_params")
		if err != nil {
			return nil, err
		}
		p.subjectSet, p.SubjectParams = true, list
	}
	if doc.MinTier != nil {
		n, ok := asInt(doc.MinTier)
		if !ok || n < 1 || n > 4 {
			return nil, refuse(path+".min_tier", "must be a whole number from 1 (independent system) to 4 (screen consistency)")
		}
		p.MinTier = &n
	}
	if doc.RunMinTier != nil {
		n, ok := asInt(doc.RunMinTier)
		if !ok || n < 1 || n > 4 {
			return nil, refuse(path+".run_min_tier", "must be a whole number from 1 (independent system) to 4 (screen consistency): the weakest step tier a VERIFIED run may have")
		}
		p.RunMinTier = &n
	}
	if doc.RunMinRung != nil {
		n, ok := asInt(doc.RunMinRung)
		if !ok || n < 0 || n > 3 {
			return nil, refuse(path+".run_min_rung", "must be a whole number from 0 (visual evidence) to 3 (counterparty acknowledgment): the lowest oracle rung a step of a VERIFIED run may have")
		}
		p.RunMinRung = &n
	}
	if doc.MinSettleS != nil {
		f, ok := asSeconds(doc.MinSettleS)
		if !ok {
			return nil, refuse(path+".min_settle_s", "must be a number of seconds from 0 to %d (how long a change claim of an irreversible step keeps reading after its first CONFIRMED)", judge.MaxTimeoutS)
		}
		p.MinSettleS = &f
	}
	return p, nil
}

// asSeconds reads a number of seconds from 0 to judge.MaxTimeoutS.
func asSeconds(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) || f < 0 || f > judge.MaxTimeoutS {
		return 0, false
	}
	return f, true
}

// parseSubjectParams reads a subject_params list (of a policy or a step).
func parseSubjectParams(v any, path string) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, refuse(path, "must be a list of run-parameter names")
	}
	out := []string{}
	for i, item := range list {
		s, ok := item.(string)
		if !ok || !validName(s) {
			return nil, refuse(fmt.Sprintf("%s[%d]", path, i), "must be a run-parameter name")
		}
		out = append(out, s)
	}
	return out, nil
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n == float64(int(n)) {
			return int(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

// Effective is a fully resolved policy.
type Effective struct {
	RequireRegisteredContracts bool     `json:"require_registered_contracts"`
	RequireChangeClaim         bool     `json:"require_change_claim"`
	SubjectParams              []string `json:"subject_params"`
	MinTier                    int      `json:"min_tier"`
	RequireProvenNewness       bool     `json:"require_proven_newness"`
	// MinSettleS is the largest min_settle_s of any layer (0: none).
	MinSettleS float64 `json:"min_settle_s"`
	// RunMinTier is the weakest step tier of a VERIFIED run
	// (DefaultRunMinTier unless a layer sets it).
	RunMinTier int `json:"run_min_tier"`
	// RunMinRung is the lowest oracle rung of a step of a VERIFIED run
	// (DefaultRunMinRung unless a layer lowers it; the run receipt states
	// the floor applied).
	RunMinRung int `json:"run_min_rung"`
}

// DefaultRunMinTier is run_min_tier when no policy sets it: a run is
// VERIFIED only when every step was read at tier 1 or 2 (a separate
// system or session), never from the screen alone.
const DefaultRunMinTier = 2

// DefaultRunMinRung is run_min_rung when no policy sets it: a run is
// VERIFIED only when every step was read from the system of record itself
// (rung 2) or a counterparty (rung 3), never from the application's own
// screens or sessions alone.
const DefaultRunMinRung = 2

// Defaults is the policy with no policy block anywhere: a caller's own
// effects are refused (the operator's reviewed workflow steps decide what
// counts as proof) and a step must claim a change.
func Defaults() Effective {
	return Effective{RequireRegisteredContracts: true, RequireChangeClaim: true, MinTier: 4, SubjectParams: []string{}, RequireProvenNewness: true, RunMinTier: DefaultRunMinTier, RunMinRung: DefaultRunMinRung}
}

// Resolve layers policies, base first; nil layers are skipped.
func Resolve(layers ...*Policy) Effective {
	e := Defaults()
	for _, p := range layers {
		if p == nil {
			continue
		}
		if p.RequireRegisteredContracts != nil {
			e.RequireRegisteredContracts = *p.RequireRegisteredContracts
		}
		if p.RequireChangeClaim != nil {
			e.RequireChangeClaim = *p.RequireChangeClaim
		}
		if p.subjectSet || p.SubjectParams != nil {
			e.SubjectParams = slices.Clone(p.SubjectParams)
		}
		if p.MinTier != nil {
			e.MinTier = *p.MinTier
		}
		if p.RequireProvenNewness != nil {
			e.RequireProvenNewness = *p.RequireProvenNewness
		}
		if p.RunMinTier != nil {
			e.RunMinTier = *p.RunMinTier
		}
		if p.RunMinRung != nil {
			e.RunMinRung = *p.RunMinRung
		}
		// A floor: the largest applies, whatever the layer.
		if p.MinSettleS != nil {
			e.MinSettleS = max(e.MinSettleS, *p.MinSettleS)
		}
	}
	return e
}

// ForStep is the policy for one workflow step: the step's own
// subject_params, when it sets them, replace the resolved ones (a step that
// writes another subject's record names its own subject). s may be nil.
func (e Effective) ForStep(s *Step) Effective {
	if s != nil && s.SubjectParams != nil {
		e.SubjectParams = slices.Clone(s.SubjectParams)
	}
	return e
}

// Finding is one guard that a step's contracts break.
type Finding struct {
	Code string `json:"code"`
	// Effect is the index of the effect in the step, or -1 for the step.
	Effect  int    `json:"effect"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// HasChangeClaim reports whether the effects claim a change: a
// record_written with count_new_only expecting at least one new record, or
// an exact_new_set with at least one member. A claim of zero new records
// claims no change: an idle automation satisfies it.
func HasChangeClaim(effects []judge.Effect) bool {
	return slices.ContainsFunc(effects, ClaimsChange)
}

// ClaimsChange reports whether one effect claims a change (HasChangeClaim).
func ClaimsChange(e judge.Effect) bool {
	switch e.Kind {
	case judge.ExactNewSet:
		return len(e.NewRecords) > 0
	case judge.RecordWritten:
		return e.CountNewOnly && e.ExpectedCount > 0
	}
	return false
}

// IsChangeClaim reports whether an effect is of a change-claim form
// (record_written with count_new_only, or exact_new_set), whatever count
// it expects: the effects a settle window watches for late writes.
func IsChangeClaim(e judge.Effect) bool {
	return e.Kind == judge.ExactNewSet || (e.Kind == judge.RecordWritten && e.CountNewOnly)
}

// SelectorParams returns the run parameters an effect binds through a
// selector: match, new_records or idempotency_key, by {param} or as a
// {template} placeholder (a parameter in value does not select anything).
func SelectorParams(e judge.Effect) map[string]bool {
	out := map[string]bool{}
	add := func(s judge.Selector) {
		for _, v := range s {
			addParams(out, v)
		}
	}
	add(e.Match)
	for _, s := range e.NewRecords {
		add(s)
	}
	if e.IdempotencyKey != nil {
		addParams(out, *e.IdempotencyKey)
	}
	return out
}

// addParams adds the run parameters v reads: the one a {param} names, or
// every placeholder of a {template}.
func addParams(out map[string]bool, v judge.Value) {
	for _, p := range v.Params() {
		out[p] = true
	}
}

// ReferencedParams returns every run parameter an effect references.
func ReferencedParams(e judge.Effect) map[string]bool {
	out := SelectorParams(e)
	if e.Value != nil {
		addParams(out, *e.Value)
	}
	return out
}

// Finding codes, shared by the daemon's refusals and `verifyctl lint`.
const (
	CodeMissingEffectContract = "missing_effect_contract"
	CodeNoChangeClaim         = "no_change_claim"
	CodeSubjectNotSelected    = "subject_not_selected"
	CodeSecretParamInContract = "secret_param_in_contract"
	CodeSameChannelOracle     = "same_channel_oracle"
	CodeWeakTier              = "weak_tier"
	CodeNewnessUnproven       = "newness_unproven"
)

// CheckContracts applies the policy's contract guards (change claim, subject
// selection, secret parameters) to one step's effects. path names the
// effects list in messages (e.g. "effects" or "steps[0].effects"). Tier
// guards need the selected candidates: see CheckTiers.
func CheckContracts(p Effective, effects []judge.Effect, secret map[string]bool, path string) []Finding {
	var out []Finding
	if p.RequireChangeClaim && !HasChangeClaim(effects) {
		out = append(out, Finding{Code: CodeNoChangeClaim, Effect: -1, Path: path,
			Message: "no effect claims a change (a record_written with count_new_only: true and expected_count of 1 or more, or an exact_new_set with at least one member): an idle automation would pass; add one, or set policy.require_change_claim: false in the operator's deployment or workflow file"})
	}
	for i, e := range effects {
		epath := fmt.Sprintf("%s[%d]", path, i)
		if e.Kind == judge.RecordWritten || e.Kind == judge.FieldEquals || e.Kind == judge.ExactNewSet {
			sel := SelectorParams(e)
			for _, sp := range p.SubjectParams {
				if !sel[sp] {
					out = append(out, Finding{Code: CodeSubjectNotSelected, Effect: i, Path: epath,
						Message: fmt.Sprintf("the subject parameter %q is not bound through a selector (match, new_records or idempotency_key); a write to another subject would pass; add %s: {param: %s} to match", sp, sp, sp)})
				}
			}
		}
		refs := ReferencedParams(e)
		names := make([]string, 0, len(refs))
		for n := range refs {
			if secret[n] {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			out = append(out, Finding{Code: CodeSecretParamInContract, Effect: i, Path: epath,
				Message: fmt.Sprintf("the contract references the secret parameter %q; a contract is hashed, stored and shown as evidence, so it may not carry a secret; compare a non-secret field instead", n)})
		}
	}
	return out
}

// CheckTier applies the tier guards to one effect's selected candidate.
func CheckTier(p Effective, tier int, candidate string, effect int, path string) []Finding {
	var out []Finding
	if tier > p.MinTier {
		out = append(out, Finding{Code: CodeWeakTier, Effect: effect, Path: path,
			Message: fmt.Sprintf("the selected candidate %s reads at tier %d, weaker than policy.min_tier %d; offer a stronger candidate or lower the requirement in the operator's policy", candidate, tier, p.MinTier)})
	}
	return out
}

// ClaimsNewness reports whether an effect counts records as new since the
// baseline: a record_written with count_new_only, an exact_new_set, or a
// field_equals with new_only.
func ClaimsNewness(e judge.Effect) bool {
	return e.Kind == judge.ExactNewSet || (e.Kind == judge.RecordWritten && e.CountNewOnly) ||
		(e.Kind == judge.FieldEquals && e.NewOnly)
}

// Reader is what the newness guard needs of a selected candidate: its name
// in messages (e.g. "0 (sql)"), whether it has a census, its newness:
// declaration and what narrows its read (config.Candidate.Narrowing).
type Reader struct {
	Name      string
	Census    bool
	Newness   string
	Narrowing []string
}

// CheckNewness applies require_proven_newness to one effect read through
// its selected candidate: a change claim over a narrowed read proves only
// that a record newly matches the read (an existing record re-assigned to
// the subject would count as new), so it needs a census or the operator's
// newness: declaration.
func CheckNewness(p Effective, e judge.Effect, r Reader, effect int, path string) []Finding {
	if !p.RequireProvenNewness || !ClaimsNewness(e) || r.Census || r.Newness != "" || len(r.Narrowing) == 0 {
		return nil
	}
	return []Finding{{Code: CodeNewnessUnproven, Effect: effect, Path: path,
		Message: fmt.Sprintf("the change claim counts records new since the baseline, but the selected candidate %s reads a narrowed collection (%s), so an existing record that now matches (re-assigned or edited) would count as new; "+
			"declare census: on the candidate (an unbound read of the whole collection's identities), or newness: whole_read (you assert the read returns the whole collection or filters only on fields no step can change), or newness: newly_matching (a reviewed, documented risk); or set policy.require_proven_newness: false in the operator's policy",
			r.Name, strings.Join(r.Narrowing, "; "))}}
}

// Package config reads what operators write: a deployment's `effects:`
// section (one `kind:` or a `candidates:` list) and the daemon's own config
// file. It resolves secrets from environment-variable names, binds plugin
// option parameters, and refuses anything malformed with the path and the
// fix. It never logs, returns or hashes a secret value.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/deployment"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// BuiltinKinds are the kinds verifierd ships or reserves (internal/builtin).
// A plugin can never take one of these names, and plugin-only fields are
// refused on them.
var BuiltinKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, a := range builtin.Adapters {
		m[a.Kind] = true
	}
	for _, k := range builtin.Reserved {
		m[k] = true
	}
	return m
}()

// Deployment is a parsed effects section.
type Deployment struct {
	Candidates []Candidate
	// Policy is the deployment's top-level policy: block (nil when absent):
	// the operator's tightening or relaxing of the daemon's contract guards
	// for steps read through this deployment. Only a registered deployment
	// may carry one.
	Policy *workflow.Policy
	// Notices are what loaded but is spelt differently from verifierd's
	// own keys (spelling.go), in document order; see TakeNotices.
	Notices []Notice
	gate    *noticeGate
}

// Candidate is one read boundary a deployment offers.
type Candidate struct {
	Index int
	Kind  string
	// Section is the kind's own fields: what the adapter receives
	// (sdk/unstable/deployment documents the shape). Secret references stay as
	// environment-variable names; Resolve binds option_params into options.
	Section map[string]any
	// Secrets maps a slot (the dotted path of a *_env key, or
	// secret_env.<slot>; sdk/unstable/deployment's rule) to the environment
	// variable it names.
	Secrets map[string]string
	// Judging settings that apply to this candidate's verdicts.
	Redaction judge.Redaction
	Freshness *FreshnessSetting
	SettleS   float64
	// OptionParams are plugin option_params, bound at Resolve.
	OptionParams map[string]judge.Value
	// Compensator is the optional compensator section. It is the daemon's:
	// it never reaches the adapter, and neither do its write credentials
	// (CompensatorSecrets, slot -> variable name).
	Compensator        map[string]any
	CompensatorSecrets map[string]string
	// Census is the candidate's census (census.go): the derived candidate
	// that reads the whole collection with the census's read keys and this
	// candidate's connection and credentials; nil when none is declared.
	Census *Candidate
	// CensusScope is how Census is known to cover the whole collection:
	// CensusScopeProven (the daemon proved its read whole) or
	// CensusScopeDeclared (the operator's census_scope: declared); "" when
	// there is no census.
	CensusScope string
	// Newness is the operator's newness: declaration, NewnessWholeRead or
	// NewnessNewlyMatching; "" when not declared.
	Newness string
	// Changes is the candidate's write set (changes.go); nil when none is
	// declared.
	Changes *ChangesSetting
}

// FreshnessSetting is a deployment's freshness window.
type FreshnessSetting struct {
	Field   string
	WindowS float64
}

// defaultableKeys may also be set once at the effects level for all
// candidates.
var defaultableKeys = []string{"evidence_redact_fields", "evidence_keep_fields", "freshness_field", "freshness_window_s", "settle_s"}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func errorf(path, format string, args ...any) error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// ReadDeployment reads the deployment file at path (ParseDeployment); a
// refusal names the file.
func ReadDeployment(path string) (*Deployment, error) {
	return workflow.ReadFile(path, "deployment file", ParseDeployment)
}

// ParseDeployment reads a deployment document (YAML or JSON) and returns its
// effects section. Other top-level sections belong to other tools and are
// left alone.
func ParseDeployment(data []byte) (*Deployment, error) {
	top, err := workflow.DecodeMap(data, "deployment", "must be a map with an effects: section")
	if err != nil {
		return nil, err
	}
	eff, ok := top["effects"]
	if !ok {
		return nil, errorf("effects", "missing: the deployment needs an effects: section with a kind: or candidates:")
	}
	em, ok := eff.(map[string]any)
	if !ok {
		return nil, errorf("effects", "must be a map with kind: or candidates:")
	}
	d := &Deployment{gate: &noticeGate{}}
	if raw, present := top["policy"]; present && raw != nil {
		p, err := workflow.ParsePolicy(raw, "policy")
		if err != nil {
			return nil, err
		}
		d.Policy = p
	}
	cands, hasCands := em["candidates"]
	_, hasKind := em["kind"]
	switch {
	case hasCands && hasKind:
		return nil, errorf("effects", "write either kind: (one boundary) or candidates: (a list), not both")
	case hasKind:
		c, err := d.parseCandidate(em, "effects", 0, nil)
		if err != nil {
			return nil, err
		}
		d.Candidates = []Candidate{c}
	case hasCands:
		list, ok := cands.([]any)
		if !ok || len(list) == 0 {
			return nil, errorf("effects.candidates", "must be a non-empty list of sections, each with a kind:")
		}
		defaults := map[string]any{}
		for k, v := range em {
			switch {
			case k == "candidates":
			case contains(defaultableKeys, k):
				defaults[k] = v
			default:
				se := strict.UnknownKey("effects", k, append([]string{"candidates"}, defaultableKeys...))
				return nil, errorf(se.Path, "%s (a key of one candidate goes inside its entry)", se.Message)
			}
		}
		for i, item := range list {
			sec, ok := item.(map[string]any)
			path := fmt.Sprintf("effects.candidates[%d]", i)
			if !ok {
				return nil, errorf(path, "must be a map with a kind:")
			}
			c, err := d.parseCandidate(sec, path, i, defaults)
			if err != nil {
				return nil, err
			}
			d.Candidates = append(d.Candidates, c)
		}
	default:
		return nil, errorf("effects", "needs kind: (one boundary) or candidates: (a list of boundaries)")
	}
	return d, nil
}

// candidateDoc holds the keys of a candidate that the daemon reads itself,
// for the strict decoder (sdk/unstable/strict); every other key of the section is
// the adapter's, which checks it. A null is an absent key. secret_env's
// values are checked here, never quoted: a value written there by mistake
// may be the secret itself.
type candidateDoc struct {
	Kind                 string         `json:"kind"`
	EvidenceRedactFields []string       `json:"evidence_redact_fields"`
	EvidenceKeepFields   []string       `json:"evidence_keep_fields"`
	FreshnessField       *string        `json:"freshness_field"`
	FreshnessWindowS     any            `json:"freshness_window_s"`
	SettleS              any            `json:"settle_s"`
	Options              map[string]any `json:"options"`
	OptionParams         map[string]any `json:"option_params"`
	SecretEnv            map[string]any `json:"secret_env"`
	Compensator          map[string]any `json:"compensator"`
	Census               any            `json:"census"`
	Newness              any            `json:"newness"`
	Changes              any            `json:"changes"`
}

// parseCandidate reads one candidate's section into d's notices and the
// candidate it returns.
func (d *Deployment) parseCandidate(sec map[string]any, path string, index int, defaults map[string]any) (Candidate, error) {
	c := Candidate{Index: index, Section: map[string]any{}, Secrets: map[string]string{}}
	sec, notices, err := canonicalSpelling(sec, path, index)
	if err != nil {
		return c, err
	}
	d.Notices = append(d.Notices, notices...)
	common := maps.Clone(defaults)
	if common == nil {
		common = map[string]any{}
	}
	for k, v := range sec {
		if deployment.DaemonKey(k) {
			common[k] = v
		}
	}
	var doc candidateDoc
	if err := workflow.Decode(common, path, &doc); err != nil {
		return c, err
	}
	if doc.Kind == "" {
		return c, errorf(path+".kind", "must name the adapter kind, e.g. kind: sql")
	}
	c.Kind = doc.Kind
	if err := c.parseJudging(&doc, path); err != nil {
		return c, err
	}
	// What reaches the adapter, and under which secret slots, is the SDK's
	// reading (sdk/unstable/deployment), so the qualification kit configures an
	// adapter exactly as this does.
	ps, err := deployment.Parse(sec, path, !BuiltinKinds[c.Kind])
	if err != nil {
		return c, asError(err)
	}
	c.Section, c.Secrets, c.OptionParams = ps.Fields, ps.Secrets, ps.OptionParams
	if doc.Compensator != nil {
		c.Compensator = doc.Compensator
		c.CompensatorSecrets = map[string]string{}
		if err := deployment.EnvRefs(doc.Compensator, "compensator", path, c.CompensatorSecrets); err != nil {
			return c, asError(err)
		}
	}
	if err := parseNewness(&c, sec, path); err != nil {
		return c, err
	}
	if err := parseChanges(&c, sec, path); err != nil {
		return c, err
	}
	return c, nil
}

// parseJudging reads the keys that shape the candidate's verdicts:
// evidence redaction, freshness and settling.
func (c *Candidate) parseJudging(doc *candidateDoc, path string) error {
	for _, l := range []struct {
		key    string
		fields []string
	}{{"evidence_redact_fields", doc.EvidenceRedactFields}, {"evidence_keep_fields", doc.EvidenceKeepFields}} {
		for i, f := range l.fields {
			if f == "" {
				return errorf(fmt.Sprintf("%s.%s[%d]", path, l.key, i), "must be a record field name")
			}
		}
	}
	c.Redaction.RedactFields, c.Redaction.KeepFields = doc.EvidenceRedactFields, doc.EvidenceKeepFields
	if err := c.Redaction.Validate(path); err != nil {
		if je, ok := errors.AsType[*refusal.Error](err); ok {
			return &refusal.Error{Path: je.Path, Message: je.Message}
		}
		return err
	}
	switch {
	case doc.FreshnessField != nil:
		if *doc.FreshnessField == "" {
			return errorf(path+".freshness_field", "must name the record's timestamp field")
		}
		if doc.FreshnessWindowS == nil {
			return errorf(path+".freshness_window_s", "freshness_field needs freshness_window_s (seconds)")
		}
		ws, err := seconds(doc.FreshnessWindowS, path+".freshness_window_s", 366*24*3600)
		if err != nil {
			return err
		}
		c.Freshness = &FreshnessSetting{Field: *doc.FreshnessField, WindowS: ws}
	case doc.FreshnessWindowS != nil:
		return errorf(path+".freshness_field", "freshness_window_s needs freshness_field (the record's timestamp field)")
	}
	if doc.SettleS != nil {
		var err error
		if c.SettleS, err = seconds(doc.SettleS, path+".settle_s", judge.MaxTimeoutS); err != nil {
			return err
		}
	}
	return nil
}

// namesCredential reports whether an option key names a credential
// (sdk/unstable/deployment.NamesCredential).
func namesCredential(key string) bool { return deployment.NamesCredential(key) }

// asError is the SDK's refusal as this package's: the same type
// (sdk/refusal), kept whole, code included.
func asError(err error) error { return err }

// Resolve returns the candidate's adapter config (JSON) and secrets for one
// run: option_params are bound to params, and every secret reference is
// looked up with lookupEnv after allow says the daemon permits it. A missing
// or refused variable fails loud, naming the variable, never a value.
func (c *Candidate) Resolve(params map[string]string, lookupEnv func(string) (string, bool), allow func(string) bool) (configJSON []byte, secrets map[string]string, err error) {
	ps := deployment.Section{Kind: c.Kind, Fields: c.Section, Secrets: c.Secrets, OptionParams: c.OptionParams}
	configJSON, secrets, err = ps.Resolve(params, fmt.Sprintf("candidates[%d]", c.Index), lookupEnv, allow)
	if err != nil {
		return nil, nil, asError(err)
	}
	return configJSON, secrets, nil
}

// Codes of a secret reference that does not resolve (sdk/unstable/deployment): the
// first is the operator's policy (the variable is outside secrets.allow),
// the second the platform's (the variable is not set where the daemon
// runs).
const (
	CodeSecretNotAllowed = deployment.CodeSecretNotAllowed
	CodeSecretUnset      = deployment.CodeSecretUnset
)

// ResolveCompensator resolves the compensator's credentials under the same
// rules as Resolve. Slots keep their "compensator." prefix.
func (c *Candidate) ResolveCompensator(lookupEnv func(string) (string, bool), allow func(string) bool) (map[string]string, error) {
	out, err := deployment.LookupSecrets(c.CompensatorSecrets, fmt.Sprintf("candidates[%d]", c.Index), lookupEnv, allow)
	if err != nil {
		return nil, asError(err)
	}
	return out, nil
}

func seconds(v any, path string, max float64) (float64, error) {
	n, ok := v.(json.Number)
	f, err := strconv.ParseFloat(string(n), 64)
	if !ok || err != nil || f < 0 || f > max || math.IsNaN(f) {
		return 0, errorf(path, "must be a number of seconds from 0 to %g", max)
	}
	return f, nil
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

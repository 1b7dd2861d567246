package reward

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// ContractSchema is the schema key of contract.yaml.
const ContractSchema = "verifierd.reward-contract/v1"

// Files of a reward contract directory.
const (
	ContractFile    = "contract.yaml"
	RequiredFile    = "required_effects.yaml"
	ForbiddenFile   = "forbidden_effects.yaml"
	CertificateFile = "certificate.json"
)

// Limits of the scoring block (the reference's).
const (
	maxMagnitude   = 1e6
	maxIdentity    = 32
	maxComponents  = 64
	unscoredPolicy = "unscored"
)

// Component is one named share of the scalar.
type Component struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// Scoring maps outcomes to scalars. Uncertain episodes and platform
// failures are always unscored: they can never be declared 0.
type Scoring struct {
	VerifiedReward           float64 `json:"verified_reward"`
	WrongEffectReward        float64 `json:"wrong_effect_reward"`
	HaltedBeforeEffectReward float64 `json:"halted_before_effect_reward"`
	RefusedReward            float64 `json:"refused_reward"`
	RejectedPolicyReward     float64 `json:"rejected_policy_reward"`
	UncertainEpisodes        string  `json:"uncertain_episodes"`
	PlatformFailures         string  `json:"platform_failures"`
}

// CertificatePolicy is what a certificate for this contract must satisfy.
type CertificatePolicy struct {
	Epsilon                 float64 `json:"epsilon"`
	Delta                   float64 `json:"delta"`
	Threshold               float64 `json:"threshold"`
	CalibrationCorpusDigest string  `json:"calibration_corpus_digest"`
	ExpiryPolicyUpdates     int64   `json:"expiry_policy_updates"`
}

// Contract is a loaded reward contract.
type Contract struct {
	// Name is the contract's name in the daemon config (rewards: NAME).
	Name string `json:"-"`
	Dir  string `json:"-"`

	Schema            string             `json:"schema"`
	ID                string             `json:"id"`
	Version           string             `json:"version"`
	Deployment        string             `json:"deployment"`
	IdentityKeys      []string           `json:"identity_keys"`
	Components        []Component        `json:"components"`
	Scoring           Scoring            `json:"scoring"`
	CertificatePolicy *CertificatePolicy `json:"certificate_policy"`
	RequiredTree      any                `json:"required_effects"`
	ForbiddenTree     any                `json:"forbidden_effects"`

	Required  []judge.Effect `json:"-"`
	Forbidden []judge.Effect `json:"-"`
	// Digest is "sha256:" over the canonical JSON of the loaded model
	// (defaults included, effects as parsed).
	Digest string `json:"-"`
	// CorpusDigest is the digest of the corpus derived from the effects.
	CorpusDigest string `json:"-"`
	// Certificate is the verified certificate.json, or nil.
	Certificate *Certificate `json:"-"`
}

// A refused contract is a refusal (sdk/refusal): its Code is the rule
// below, its Path the file, and its Message names the rule before saying
// what is wrong, so the text reads "file: rule: why".

// Load-time rules, the Code of a refused contract.
const (
	RuleInvalid            = "invalid_contract"
	RuleNoRequiredEffects  = "no_required_effects"
	RuleNoChangeClaim      = workflow.CodeNoChangeClaim
	RuleUnknownParam       = "param_not_identity_key"
	RuleIdentityNotBound   = "identity_key_not_selected"
	RuleCertificateDigest  = "certificate_contract_mismatch"
	RuleCertificateCorpus  = "certificate_corpus_mismatch"
	RuleCertificateInvalid = "certificate_invalid"
	RuleCertificateUntrust = "certificate_signature"
)

// contractFile is contract.yaml as written, for the strict decoder
// (sdk/unstable/strict): its fields are the file's keys. A nil pointer in scoring
// keeps the default; certificate_policy is decoded over its defaults by
// loadCertificatePolicy.
type contractFile struct {
	Schema            string       `json:"schema"`
	ID                string       `json:"id"`
	Version           string       `json:"version"`
	Deployment        string       `json:"deployment"`
	IdentityKeys      []string     `json:"identity_keys"`
	Components        []Component  `json:"components"`
	Scoring           *scoringFile `json:"scoring"`
	CertificatePolicy any          `json:"certificate_policy"`
}

type scoringFile struct {
	VerifiedReward           *float64 `json:"verified_reward"`
	WrongEffectReward        *float64 `json:"wrong_effect_reward"`
	HaltedBeforeEffectReward *float64 `json:"halted_before_effect_reward"`
	RefusedReward            *float64 `json:"refused_reward"`
	RejectedPolicyReward     *float64 `json:"rejected_policy_reward"`
	UncertainEpisodes        *string  `json:"uncertain_episodes"`
	PlatformFailures         *string  `json:"platform_failures"`
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Trust is how a certificate's signature is checked: by the daemon's own
// key, or by one listed under rewards_trust.
type Trust struct {
	// Keys maps key ids to raw Ed25519 public keys.
	Keys map[string][]byte
}

// refuseIn is a refused contract: the file, the rule and why.
func refuseIn(file, rule, format string, args ...any) error {
	return refusal.New(rule, file, rule+": "+fmt.Sprintf(format, args...))
}

// LoadContract reads and checks a contract directory. name is the
// contract's name in the daemon config. Every refusal names the file and
// the rule.
func LoadContract(name, dir string, trust Trust) (*Contract, error) {
	cpath := filepath.Join(dir, ContractFile)
	f, err := readContractFile(cpath)
	if err != nil {
		return nil, err
	}
	c := &Contract{Name: name, Dir: dir, Schema: f.Schema, ID: f.ID, Version: f.Version, Deployment: f.Deployment}
	if err := checkHead(c, f, cpath); err != nil {
		return nil, err
	}
	if c.Scoring, err = loadScoring(f.Scoring, cpath); err != nil {
		return nil, err
	}
	if f.CertificatePolicy != nil {
		if c.CertificatePolicy, err = loadCertificatePolicy(f.CertificatePolicy, cpath); err != nil {
			return nil, err
		}
	}
	if err := loadContractEffects(c, dir); err != nil {
		return nil, err
	}
	c.Digest = "sha256:" + canonicalDigest(c)
	corpus, err := DeriveCorpus(c)
	if err != nil {
		return nil, refuseIn(filepath.Join(dir, RequiredFile), RuleInvalid, "%v", err)
	}
	c.CorpusDigest = corpus.Digest
	if cp := c.CertificatePolicy; cp != nil && cp.CalibrationCorpusDigest != "" && cp.CalibrationCorpusDigest != c.CorpusDigest {
		return nil, refuseIn(cpath, RuleCertificateCorpus, "certificate_policy.calibration_corpus_digest %s differs from the corpus derived from these effects (%s); recalibrate", cp.CalibrationCorpusDigest, c.CorpusDigest)
	}
	if c.Certificate, err = loadCertificate(c, dir, trust); err != nil {
		return nil, err
	}
	return c, nil
}

// readContractFile reads contract.yaml (YAML or JSON) with the strict
// decoder: an unknown key or a value of the wrong type is refused with
// its path.
func readContractFile(cpath string) (*contractFile, error) {
	data, err := os.ReadFile(cpath)
	if err != nil {
		return nil, refuseIn(cpath, RuleInvalid, "%v", err)
	}
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		return nil, refuseIn(cpath, RuleInvalid, "cannot parse: %v", err)
	}
	var f contractFile
	if err := strict.Decode(tree, "", &f); err != nil {
		return nil, refuseIn(cpath, RuleInvalid, "%v", err)
	}
	return &f, nil
}

// checkHead checks the contract's identity (schema, id, version,
// deployment), its identity keys and its components, and copies them to c
// in a canonical order.
func checkHead(c *Contract, f *contractFile, cpath string) error {
	switch {
	case f.Schema != ContractSchema:
		return refuseIn(cpath, RuleInvalid, "schema: must be %q", ContractSchema)
	case f.ID == "" || len(f.ID) > 128:
		return refuseIn(cpath, RuleInvalid, "id: give the contract an id of 1 to 128 characters")
	case f.Version == "":
		return refuseIn(cpath, RuleInvalid, "version: give the contract a version")
	case f.Deployment == "":
		return refuseIn(cpath, RuleInvalid, "deployment: name the registered deployment that is the oracle")
	}
	if len(f.IdentityKeys) == 0 || len(f.IdentityKeys) > maxIdentity {
		return refuseIn(cpath, RuleInvalid, "identity_keys: give 1 to %d run-parameter names that name the graded subject", maxIdentity)
	}
	seen := map[string]bool{}
	for i, k := range f.IdentityKeys {
		if !nameRE.MatchString(k) || seen[k] {
			return refuseIn(cpath, RuleInvalid, "identity_keys[%d]: %q must be a unique parameter name (letters, digits, _)", i, k)
		}
		seen[k] = true
	}
	c.IdentityKeys = append([]string(nil), f.IdentityKeys...)
	slices.Sort(c.IdentityKeys)
	components := f.Components
	if len(components) == 0 {
		components = []Component{{Name: "terminal_effect", Weight: 1}}
	}
	if len(components) > maxComponents {
		return refuseIn(cpath, RuleInvalid, "components: at most %d", maxComponents)
	}
	cseen := map[string]bool{}
	for i, comp := range components {
		if comp.Name == "" || cseen[comp.Name] || !(comp.Weight > 0) || comp.Weight > maxMagnitude {
			return refuseIn(cpath, RuleInvalid, "components[%d]: a unique name and a weight in (0, 1e6]", i)
		}
		cseen[comp.Name] = true
	}
	c.Components = append([]Component(nil), components...)
	slices.SortFunc(c.Components, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// loadScoring applies the scoring block over the defaults: a verified
// episode earns 1, a wrong effect -1, and an uncertain episode or a
// platform failure is never scored.
func loadScoring(s *scoringFile, cpath string) (Scoring, error) {
	sc := Scoring{VerifiedReward: 1, WrongEffectReward: -1, UncertainEpisodes: unscoredPolicy, PlatformFailures: unscoredPolicy}
	if s == nil {
		return sc, nil
	}
	for _, x := range []struct {
		dst *float64
		src *float64
		key string
		pos bool
	}{
		{&sc.VerifiedReward, s.VerifiedReward, "verified_reward", true},
		{&sc.WrongEffectReward, s.WrongEffectReward, "wrong_effect_reward", false},
		{&sc.HaltedBeforeEffectReward, s.HaltedBeforeEffectReward, "halted_before_effect_reward", false},
		{&sc.RefusedReward, s.RefusedReward, "refused_reward", false},
		{&sc.RejectedPolicyReward, s.RejectedPolicyReward, "rejected_policy_reward", false},
	} {
		if x.src == nil {
			continue
		}
		v := *x.src
		if math.IsNaN(v) || math.Abs(v) > maxMagnitude || (x.pos && !(v > 0)) || (!x.pos && v > 0) {
			if x.pos {
				return sc, refuseIn(cpath, RuleInvalid, "scoring.%s: must be > 0 and at most 1e6", x.key)
			}
			return sc, refuseIn(cpath, RuleInvalid, "scoring.%s: must be ≤ 0 and at least -1e6", x.key)
		}
		*x.dst = v
	}
	for _, x := range []struct {
		key string
		v   *string
	}{{"uncertain_episodes", s.UncertainEpisodes}, {"platform_failures", s.PlatformFailures}} {
		if x.v != nil && *x.v != unscoredPolicy {
			return sc, refuseIn(cpath, RuleInvalid, "scoring.%s: is always %q; an episode whose effect is unknown is never scored 0", x.key, unscoredPolicy)
		}
	}
	return sc, nil
}

// loadCertificatePolicy decodes the certificate_policy block over its
// defaults (a key left out keeps its default) and checks the result.
func loadCertificatePolicy(tree any, cpath string) (*CertificatePolicy, error) {
	cp := &CertificatePolicy{Epsilon: 0.05, Delta: 0.05, Threshold: 0.5, ExpiryPolicyUpdates: 1000}
	if err := strict.Decode(tree, "certificate_policy", cp); err != nil {
		return nil, refuseIn(cpath, RuleInvalid, "%v", err)
	}
	switch {
	case !(cp.Epsilon > 0 && cp.Epsilon < 1):
		return nil, refuseIn(cpath, RuleInvalid, "certificate_policy.epsilon: must be in (0, 1)")
	case !(cp.Delta > 0 && cp.Delta < 1):
		return nil, refuseIn(cpath, RuleInvalid, "certificate_policy.delta: must be in (0, 1)")
	case cp.ExpiryPolicyUpdates < 1:
		return nil, refuseIn(cpath, RuleInvalid, "certificate_policy.expiry_policy_updates: must be at least 1")
	case cp.CalibrationCorpusDigest != "" && !digestRE.MatchString(cp.CalibrationCorpusDigest):
		return nil, refuseIn(cpath, RuleInvalid, "certificate_policy.calibration_corpus_digest: must be sha256:<64 hex>")
	}
	return cp, nil
}

// loadContractEffects reads the required and forbidden effects into c and
// checks them against the identity keys: at least one required change
// claim, every {param} an identity key, every identity key selected.
func loadContractEffects(c *Contract, dir string) error {
	rpath := filepath.Join(dir, RequiredFile)
	req, rtree, err := loadEffects(rpath, "required_effects", true)
	if err != nil {
		return err
	}
	fpath := filepath.Join(dir, ForbiddenFile)
	forb, ftree, err := loadEffects(fpath, "forbidden_effects", false)
	if err != nil {
		return err
	}
	c.Required, c.RequiredTree, c.Forbidden, c.ForbiddenTree = req, rtree, forb, ftree
	if len(req) == 0 {
		return refuseIn(rpath, RuleNoRequiredEffects, "declare at least one required effect; a reward with nothing required proves nothing")
	}
	if !workflow.HasChangeClaim(req) {
		return refuseIn(rpath, RuleNoChangeClaim, "the required effects assert only what the store holds now, so a record that was already there satisfies them and an idle rollout earns the full reward; add a record_written with count_new_only: true or an exact_new_set")
	}
	identity := map[string]bool{}
	for _, k := range c.IdentityKeys {
		identity[k] = true
	}
	for _, x := range []struct {
		path string
		list []judge.Effect
		name string
	}{{rpath, req, "required_effects"}, {fpath, forb, "forbidden_effects"}} {
		for i, e := range x.list {
			for _, p := range sortedNames(workflow.ReferencedParams(e)) {
				if !identity[p] {
					return refuseIn(x.path, RuleUnknownParam, "%s[%d]: {param: %s} is not one of identity_keys (%s); an episode supplies only its subject's identity", x.name, i, p, strings.Join(c.IdentityKeys, ", "))
				}
			}
		}
	}
	bound := map[string]bool{}
	for _, e := range req {
		for p := range workflow.SelectorParams(e) {
			bound[p] = true
		}
	}
	var unbound []string
	for _, k := range c.IdentityKeys {
		if !bound[k] {
			unbound = append(unbound, k)
		}
	}
	if len(unbound) > 0 {
		return refuseIn(rpath, RuleIdentityNotBound, "identity key(s) %s are not selected by any required effect (match, new_records or idempotency_key; value does not count), so a write to another subject would pass; add e.g. match: {%s: {param: %s}}", strings.Join(unbound, ", "), unbound[0], unbound[0])
	}
	return nil
}

// loadCertificate reads and checks certificate.json beside the contract;
// nil when there is none.
func loadCertificate(c *Contract, dir string, trust Trust) (*Certificate, error) {
	certPath := filepath.Join(dir, CertificateFile)
	raw, err := os.ReadFile(certPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, refuseIn(certPath, RuleCertificateInvalid, "%v", err)
	}
	cert, err := checkCertificate(raw, c, trust)
	if err != nil {
		if r, ok := refusal.As(err); ok {
			return nil, r.Under(certPath)
		}
		return nil, refuseIn(certPath, RuleCertificateInvalid, "%v", err)
	}
	return cert, nil
}

func loadEffects(path, name string, required bool) ([]judge.Effect, any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if !required && errors.Is(err, os.ErrNotExist) {
			return nil, []any{}, nil
		}
		return nil, nil, refuseIn(path, RuleInvalid, "%v", err)
	}
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		return nil, nil, refuseIn(path, RuleInvalid, "cannot parse: %v", err)
	}
	if tree == nil {
		tree = []any{}
	}
	list, err := judge.LoadEffects(tree, name)
	if err != nil {
		return nil, nil, refuseIn(path, RuleInvalid, "%v", err)
	}
	return list, tree, nil
}

// sortedNames returns m's keys in order, never nil: a corpus marshals
// them as a JSON list.
func sortedNames(m map[string]bool) []string {
	out := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(out)
	return out
}

// canonicalDigest is the hex SHA-256 of v's canonical JSON: v is marshalled,
// decoded with exact numbers and re-encoded with sorted keys.
func canonicalDigest(v any) string {
	sum := sha256.Sum256([]byte(canonicalJSON(v)))
	return hex.EncodeToString(sum[:])
}

func canonicalJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types reach here
	}
	tree, err := judge.DecodeJSON(raw)
	if err != nil {
		panic(err)
	}
	return judge.CanonicalJSON(tree)
}

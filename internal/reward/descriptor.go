package reward

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// Refusal codes (the reference's names). A refused registration or
// scoring is a refusal (sdk/refusal) with one of them as its Code and the
// detail as its Message; Status gives its HTTP status.
const (
	CodeInvalidEpisode        = "invalid_episode"
	CodeContractMismatch      = "contract_mismatch"
	CodeIdentityMissing       = "identity_missing"
	CodeIdentityMismatch      = "identity_mismatch"
	CodeIdentityConflict      = "identity_conflict"
	CodeDuplicateEpisode      = "duplicate_episode"
	CodePolicyUpdateRegressed = "policy_update_regressed"
	CodeNotFound              = "not_found"
	CodeUnscored              = "unscored"
	CodeCalibrationRefused    = "calibration_refused"
	// CodeNewnessUnproven: a registration whose oracle candidate reads a
	// narrowed collection with neither a census nor a newness:
	// declaration, under policy.require_proven_newness.
	CodeNewnessUnproven = "newness_unproven"
	// CodeOracleUnavailable: a registration while the deployment's first
	// candidate cannot be configured. Registering then would pin a lower
	// candidate for the episode's life, whose rewards may never certify.
	CodeOracleUnavailable = "oracle_unavailable"
)

// refuse is a refused registration or scoring: the code and the detail.
func refuse(code, format string, args ...any) *refusal.Error {
	return refusal.New(code, "", fmt.Sprintf(format, args...))
}

func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

var (
	opaqueID    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$`)
	receiptIDRE = regexp.MustCompile(`^rwd_[0-9a-f]{32}$`)
)

// ForbiddenMetadataKeys may appear neither in a descriptor's metadata nor
// in a receipt: they would carry what the episode saw or typed.
var ForbiddenMetadataKeys = []string{
	"screenshot", "screenshots", "frame", "frames", "video", "trajectory", "observation", "observations",
	"action", "actions", "ocr", "ocr_text", "typed_value", "typed_values", "parameter", "parameters",
	"prompt", "prompts", "completion", "completions", "completion_ids", "url", "hostname",
	"coordinate", "coordinates", "application_name", "organization_name", "user_name", "workflow_name",
	"phi", "image", "after_png", "before_png", "note", "record_id", "records",
}

var forbiddenMeta = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range ForbiddenMetadataKeys {
		m[k] = true
	}
	return m
}()

// descriptorDoc is a descriptor as sent, for the strict decoder
// (sdk/unstable/strict): its fields are the descriptor's keys. policy_update,
// oracle_identity and runtime_signal are read here, with their own
// refusals; metadata is only searched for forbidden keys.
type descriptorDoc struct {
	SchemaVersion        *string        `json:"schema_version"`
	EpisodeID            string         `json:"episode_id"`
	PolicyCheckpointID   string         `json:"policy_checkpoint_id"`
	PolicyUpdate         any            `json:"policy_update"`
	RewardContractDigest string         `json:"reward_contract_digest"`
	TaskID               *string        `json:"task_id"`
	EnvironmentID        *string        `json:"environment_id"`
	Metadata             map[string]any `json:"metadata"`
	OracleIdentity       any            `json:"oracle_identity"`
	RuntimeSignal        any            `json:"runtime_signal"`
}

// Descriptor is a trainer's episode descriptor, checked.
type Descriptor struct {
	EpisodeID            string
	PolicyCheckpointID   string
	PolicyUpdate         int64
	RewardContractDigest string
	Identity             map[string]string // nil when none was declared
	Signal               string
}

// ParseDescriptor checks a descriptor: known keys only, opaque ids, a
// non-negative integer policy_update, a sha256 digest, a metadata object
// without forbidden keys, a valid signal. Every failure is invalid_episode.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	tree, err := judge.DecodeJSON(data)
	if err != nil {
		return nil, refuse(CodeInvalidEpisode, "the descriptor is not JSON: %v", err)
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, refuse(CodeInvalidEpisode, "the descriptor must be a JSON object")
	}
	var doc descriptorDoc
	if err := strict.Decode(tree, "", &doc); err != nil {
		return nil, refuse(CodeInvalidEpisode, "%s", err.Error())
	}
	if doc.SchemaVersion != nil && !strings.HasSuffix(*doc.SchemaVersion, "reward-episode/v1") {
		return nil, refuse(CodeInvalidEpisode, "schema_version: must name reward-episode/v1")
	}
	for _, x := range []struct {
		key string
		v   *string
	}{{"task_id", doc.TaskID}, {"environment_id", doc.EnvironmentID}} {
		if x.v != nil && len(*x.v) > 256 {
			return nil, refuse(CodeInvalidEpisode, "%s: a string of at most 256 bytes", x.key)
		}
	}
	d := &Descriptor{EpisodeID: doc.EpisodeID, PolicyCheckpointID: doc.PolicyCheckpointID, RewardContractDigest: doc.RewardContractDigest, Signal: SignalCompleted}
	if !opaqueID.MatchString(d.EpisodeID) {
		return nil, refuse(CodeInvalidEpisode, "episode_id: 8 to 128 characters, the first a letter or digit, then letters, digits or ._:-")
	}
	if !opaqueID.MatchString(d.PolicyCheckpointID) {
		return nil, refuse(CodeInvalidEpisode, "policy_checkpoint_id: 8 to 128 characters, the first a letter or digit, then letters, digits or ._:-")
	}
	n, ok := doc.PolicyUpdate.(json.Number)
	if !ok {
		return nil, refuse(CodeInvalidEpisode, "policy_update: a whole number ≥ 0")
	}
	if d.PolicyUpdate, err = n.Int64(); err != nil || d.PolicyUpdate < 0 || d.PolicyUpdate > 1<<53-1 {
		return nil, refuse(CodeInvalidEpisode, "policy_update: a whole number from 0 to 2^53-1")
	}
	if !digestRE.MatchString(d.RewardContractDigest) {
		return nil, refuse(CodeInvalidEpisode, "reward_contract_digest: sha256:<64 lowercase hex>")
	}
	if k := forbiddenKey(doc.Metadata); k != "" {
		// The key is not echoed: a refusal body is held to the same rule
		// as a receipt.
		return nil, refuse(CodeInvalidEpisode, "metadata carries a forbidden key (the list is in docs/rewards.md): a descriptor carries no observation, typed value or record")
	}
	idv, sig := doc.OracleIdentity, doc.RuntimeSignal
	if idv == nil {
		idv = doc.Metadata["oracle_identity"]
	}
	if idv != nil {
		if d.Identity, err = parseIdentity(idv); err != nil {
			return nil, err
		}
	}
	if sig == nil {
		sig = doc.Metadata["runtime_signal"]
	}
	if sig != nil {
		s, ok := sig.(string)
		if !ok || !signals[s] {
			return nil, refuse(CodeInvalidEpisode, "runtime_signal: one of completed, halted_before_effect, refused, rejected_policy, failed_platform")
		}
		d.Signal = s
	}
	return d, nil
}

// forbiddenKey finds a forbidden key at any depth.
func forbiddenKey(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		for _, k := range keys {
			if forbiddenMeta[strings.ToLower(k)] {
				return k
			}
			if f := forbiddenKey(x[k]); f != "" {
				return f
			}
		}
	case []any:
		for _, e := range x {
			if f := forbiddenKey(e); f != "" {
				return f
			}
		}
	}
	return ""
}

// parseIdentity checks 1–32 pairs of a non-empty key and a non-empty
// scalar. A value may be written as a JSON number (its text as written) or
// a boolean (true or false), as a run parameter may over HTTP/JSON; null,
// objects and arrays are refused.
func parseIdentity(v any) (map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || len(m) > maxIdentity {
		return nil, refuse(CodeInvalidEpisode, "oracle_identity: an object of 1 to %d pairs, each a non-empty string, number or boolean", maxIdentity)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := identityText(x)
		if !ok || k == "" || s == "" || len(s) > 256 || !utf8.ValidString(s) {
			return nil, refuse(CodeInvalidEpisode, "oracle_identity: an object of 1 to %d pairs, each a non-empty string, number or boolean", maxIdentity)
		}
		out[k] = s
	}
	return out, nil
}

// identityText is the text of an identity value: a string as is, a number
// as its JSON text as written, a boolean as true or false.
func identityText(x any) (string, bool) {
	switch v := x.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), jsonnum.Valid(string(v))
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// ParseIdentity is parseIdentity for callers outside the descriptor.
func ParseIdentity(v any) (map[string]string, error) { return parseIdentity(v) }

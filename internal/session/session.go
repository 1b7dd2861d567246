// Package session runs the verification lifecycle (docs/daemon.md, "The session lifecycle"): Begin binds
// the contracts, configures the deployment's candidates, selects the
// strongest tier per effect, captures each selected adapter's baseline once
// and persists it; Verify reads through the pinned adapters only, polls until
// settled, judges, lets the adapter demote (never promote), redacts,
// persists and returns the result. A verified session answers the recorded
// result forever after.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// ErrorKind classifies a refusal for the API layer.
type ErrorKind int

// Refusal kinds.
const (
	// Invalid input: a malformed deployment, contract or request.
	Invalid ErrorKind = iota + 1
	// Refused: the session must not proceed (the client must not actuate).
	Refused
	// NotFound: no such session.
	NotFound
	// Denied: the caller asked for something only the operator may decide
	// (an inline deployment, its own contracts under
	// require_registered_contracts).
	Denied
)

// Error is a refusal with the path of the offending input.
type Error struct {
	Kind    ErrorKind
	Code    string // judge code (INVALID_CONTRACT, UNBOUND_PARAM) or rule code (no_change_claim, …) when relevant
	Path    string
	Message string

	// Reason classifies a refusal for its terminal outcome (reasonPolicy,
	// reasonPlatform); empty otherwise.
	Reason string
	// TerminalOutcome and Receipt are set on a refused Begin recorded in
	// the ledger: REJECTED_POLICY, FAILED_PLATFORM or HALTED_BEFORE_EFFECT,
	// and the signed receipt of the refusal (DSSE envelope JSON).
	TerminalOutcome string
	Receipt         json.RawMessage
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Manager runs sessions.
type Manager struct {
	Host   *pluginhost.Host
	Store  store.Backend
	Daemon *config.Daemon
	// LookupEnv resolves secret references (os.LookupEnv by default).
	LookupEnv func(string) (string, bool)
	// Clock drives settlement polling (the wall clock by default).
	Clock  judge.Clock
	Logger hclog.Logger
	// PollInterval is the first wait between after reads (judge default
	// when zero).
	PollInterval time.Duration
	// EvidenceKey keys task digests, the hidden values of stored baselines
	// and the evidence digests of receipts (LoadEvidenceKey); a Manager
	// without one uses a random key of its own lifetime.
	EvidenceKey []byte
	// Signer signs every receipt; without one, results carry no receipt
	// (the ledger is kept all the same).
	Signer *signing.Signer
	// AllowInline accepts deployments sent by the caller (the development
	// switch --allow-inline-deployments). Even then an inline deployment
	// may carry no secret, compensator or policy.
	AllowInline bool
	// Workflows are the registered workflows, loaded at start
	// (LoadWorkflows), by their name in the daemon config.
	Workflows map[string]*workflow.Workflow
	// Metrics records Begin and Verify (observe.go); nil: none.
	Metrics *metrics.Metrics

	locks        keyedMutex // serialises Verify per session id
	keyOnce      sync.Once
	ephemeralKey []byte
}

func (m *Manager) lookupEnv(name string) (string, bool) {
	if m.LookupEnv != nil {
		return m.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

func (m *Manager) clock() judge.Clock {
	if m.Clock != nil {
		return m.Clock
	}
	return wallClock{}
}

func (m *Manager) logger() hclog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return hclog.NewNullLogger()
}

// BeginRequest starts a session.
type BeginRequest struct {
	Deployment     []byte
	DeploymentName string
	Effects        []byte
	Params         map[string]string
	// Workflow and Step name a registered workflow step whose contracts
	// the session judges (instead of Effects).
	Workflow string
	Step     string
}

// BegunEffect is what Begin reports per effect.
type BegunEffect struct {
	ContractHash   string `json:"contract_hash"`
	Tier           int    `json:"tier"`
	Candidate      string `json:"candidate"`
	CandidateIndex int    `json:"candidate_index"`
}

// BeginResult is Begin's answer.
type BeginResult struct {
	SessionID string        `json:"session_id"`
	Effects   []BegunEffect `json:"effects"`
	// Registered is the workflow step whose contracts the session judges
	// (nil when the caller sent the effects).
	Registered *RegisteredStep `json:"registered_step,omitempty"`
	// UnusedParams names the run parameters that nothing of the step
	// references (unusedParams), sorted; a warning for the caller, not a
	// refusal.
	UnusedParams []string `json:"unused_params,omitempty"`
}

// meta is what the store keeps of a begun session. Secrets are not in it:
// Verify resolves them again from the daemon's environment.
type meta struct {
	ID string `json:"id"`
	// DeploymentName is the registered deployment's name; empty for inline
	// YAML. Receipts bind it (see sessionNames).
	DeploymentName string            `json:"deployment_name,omitempty"`
	BegunAt        time.Time         `json:"begun_at"`
	Deployment     []byte            `json:"deployment"`
	Effects        []byte            `json:"effects"`
	Params         map[string]string `json:"params"`
	Begin          BeginResult       `json:"begin"`
	Captures       []captureMeta     `json:"captures"`
	// IrreversibleStep is set when the step has an irreversible effect
	// (or is a registered irreversible step): every effect of it that is
	// not confirmed gets a reconciliation task (stepTasks).
	IrreversibleStep bool `json:"irreversible_step,omitempty"`
	// SettleFloorS is the policy's min_settle_s for an irreversible step
	// (0 otherwise): a capture holding a change claim settles at least
	// this long (group.settle). Taken at Begin, so Verify and every
	// re-verification apply the policy the session began under.
	SettleFloorS float64 `json:"settle_floor_s,omitempty"`
}

// captureMeta is one baseline capture: one per selected candidate.
type captureMeta struct {
	Candidate int    `json:"candidate"`
	Effects   []int  `json:"effects"`
	Reachable bool   `json:"reachable"`
	Reason    string `json:"reason,omitempty"`
	Records   int    `json:"records"`
	// KeyID names the evidence key the baseline's hidden values were keyed
	// with; empty when the deployment redacts nothing.
	KeyID string `json:"key_id,omitempty"`
	// Index is the form the baseline is stored in: 0, every record whole
	// as the adapter sent it; baselineIndexV1, an index (judge.Indexer):
	// each record kept only as far as the group's contracts read it. Any
	// other value is a form this daemon cannot read (the baseline is
	// unreadable).
	Index int `json:"index,omitempty"`
	// Digest is an indexed baseline's read digest, taken at Begin from
	// the whole records as they arrived, under the evidence key whose
	// judge.KeyID is DigestKeyID.
	Digest      string `json:"digest,omitempty"`
	DigestKeyID string `json:"digest_key_id,omitempty"`
	// Census is the candidate's census read with the baseline (census.go),
	// stored as capture store.CensusCapture(n); nil when none was read.
	Census *censusMeta `json:"census,omitempty"`
}

// baselineIndexV1 is captureMeta.Index of a baseline stored as an index.
const baselineIndexV1 = 1

func (m *Manager) deploymentBytes(req BeginRequest) ([]byte, error) {
	if req.DeploymentName == "" {
		if len(req.Deployment) == 0 {
			return nil, &Error{Kind: Invalid, Path: "deployment", Message: "give the deployment YAML or the name of a deployment in the daemon config"}
		}
		return req.Deployment, nil
	}
	if len(req.Deployment) > 0 {
		return nil, &Error{Kind: Invalid, Path: "deployment", Message: "give the deployment YAML or its name, not both"}
	}
	if len(req.DeploymentName) > MaxNameBytes {
		return nil, overLimit("deployment_name", len(req.DeploymentName), MaxNameBytes, "bytes", "name a deployment of the daemon config")
	}
	var path string
	if m.Daemon != nil {
		path = m.Daemon.Deployments[req.DeploymentName]
	}
	if path == "" {
		return nil, &Error{Kind: Invalid, Path: "deployment_name", Message: fmt.Sprintf("no deployment named %q in the daemon config", clip(req.DeploymentName))}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Kind: Refused, Reason: reasonPlatform, Path: "deployment_name", Message: fmt.Sprintf("reading deployment %q: %v", req.DeploymentName, err)}
	}
	return data, nil
}

// Parsed deployments and effects lists, cached by content (doccache.go).
// Both parsers are pure and their results are never mutated.
var (
	parsedDeployments = newDocCache[*config.Deployment](docCacheEntries, docCacheBytes)
	parsedEffects     = newDocCache[[]judge.Effect](docCacheEntries, docCacheBytes)
)

// parseDeployment parses a deployment within the limits, or takes it from
// the cache. The caller caches it once the whole request has been accepted.
func parseDeployment(data []byte) (*config.Deployment, bool, error) {
	if d, ok := parsedDeployments.get(docKey(data)); ok {
		return d, true, nil
	}
	if err := checkDocument("deployment", data); err != nil {
		return nil, false, err
	}
	tree, err := judge.DecodeDocument(data)
	if err == nil {
		if err := checkDepth("deployment", tree); err != nil {
			return nil, false, err
		}
	} else if deep := tooDeep("deployment", err); deep != nil {
		return nil, false, deep
	} // a document that does not decode otherwise is refused by ParseDeployment below
	dep, err := config.ParseDeployment(data)
	if err != nil {
		if ce, ok := errors.AsType[*config.Error](err); ok {
			return nil, false, &Error{Kind: Invalid, Path: "deployment." + clipMsg(ce.Path), Message: clipMsg(ce.Message)}
		}
		return nil, false, &Error{Kind: Invalid, Path: "deployment", Message: clipMsg(err.Error())}
	}
	if len(dep.Candidates) > MaxCandidates {
		return nil, false, overLimit("deployment.effects.candidates", len(dep.Candidates), MaxCandidates, "candidates", "keep the strongest few")
	}
	for i, c := range dep.Candidates {
		if len(c.Kind) > MaxNameBytes {
			return nil, false, overLimit(fmt.Sprintf("deployment.effects.candidates[%d].kind", i), len(c.Kind), MaxNameBytes, "bytes", "name an installed adapter kind")
		}
	}
	return dep, false, nil
}

// parse loads the deployment and the contracts and binds the contracts.
// Documents enter the cache only when the whole step is accepted.
func parse(deployment, effects []byte, params map[string]string) (*config.Deployment, []*judge.Contract, error) {
	if err := checkParams(params); err != nil {
		return nil, nil, err
	}
	dep, depCached, err := parseDeployment(deployment)
	if err != nil {
		return nil, nil, err
	}
	effKey := docKey(effects)
	list, effCached := parsedEffects.get(effKey)
	if !effCached {
		if list, err = parseEffectsDoc(effects); err != nil {
			return nil, nil, err
		}
	}
	if len(list) == 0 {
		return nil, nil, &Error{Kind: Invalid, Code: judge.CodeInvalidContract, Path: "effects", Message: "no effects declared; a step with no contract proves nothing"}
	}
	contracts := make([]*judge.Contract, len(list))
	for i, e := range list {
		c, err := judge.Bind(e, params, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			return nil, nil, judgeError(err)
		}
		contracts[i] = c
	}
	if !depCached {
		parsedDeployments.put(docKey(deployment), len(deployment), dep)
	}
	if !effCached {
		parsedEffects.put(effKey, len(effects), list)
	}
	return dep, contracts, nil
}

func judgeError(err error) error {
	if je, ok := errors.AsType[*judge.Error](err); ok {
		return &Error{Kind: Invalid, Code: je.Code, Path: clipMsg(je.Path), Message: clipMsg(je.Message)}
	}
	return &Error{Kind: Invalid, Message: clipMsg(err.Error())}
}

// effectTimeout is the longest settlement window among contracts.
func effectTimeout(contracts []*judge.Contract) time.Duration {
	var max float64
	for _, c := range contracts {
		if c.TimeoutS > max {
			max = c.TimeoutS
		}
	}
	return seconds(max)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// configureTraced is configure in a span of its own.
func (m *Manager) configureTraced(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, checked bool) ([]*pluginhost.Instance, []error) {
	ctx, span := telemetry.Start(ctx, telemetry.SpanConfigure, telemetry.KeyCandidates.Int(len(dep.Candidates)))
	defer span.End()
	insts, errs := m.configureChecked(ctx, dep, contracts, params, checked)
	for _, err := range errs {
		if err != nil {
			telemetry.Fail(span, errKind(err))
			break
		}
	}
	return insts, errs
}

// configure builds (or reuses) every candidate's adapter instance.
func (m *Manager) configure(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string) ([]*pluginhost.Instance, []error) {
	return m.configureChecked(ctx, dep, contracts, params, false)
}

// configureChecked is configure; checked says the parameters were checked
// when the session began, so the adapter is not asked again (one round
// trip fewer on Verify).
func (m *Manager) configureChecked(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, checked bool) ([]*pluginhost.Instance, []error) {
	insts := make([]*pluginhost.Instance, len(dep.Candidates))
	errs := make([]error, len(dep.Candidates))
	allow := func(string) bool { return false }
	if m.Daemon != nil {
		allow = m.Daemon.AllowSecret
	}
	for i := range dep.Candidates {
		c := &dep.Candidates[i]
		path := candidatePath(dep, i)
		cfg, secrets, err := c.Resolve(params, m.lookupEnv, allow)
		if err != nil {
			if ce, ok := errors.AsType[*config.Error](err); ok {
				// A secret outside secrets.allow is the operator's policy;
				// a secret missing from the environment is the platform's.
				reason := reasonPlatform
				if strings.Contains(ce.Message, "secrets.allow") {
					reason = reasonPolicy
				}
				errs[i] = &Error{Kind: Refused, Reason: reason, Path: "deployment.effects." + ce.Path, Message: ce.Message}
			} else {
				errs[i] = &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: err.Error()}
			}
			continue
		}
		inst, err := m.Host.Instance(ctx, pluginhost.Spec{
			Kind: c.Kind, ConfigJSON: cfg, Params: params, Secrets: secrets,
			EffectTimeout: effectTimeout(contracts), ParamsChecked: checked,
		})
		if err != nil {
			errs[i] = candidateError(dep, i, err)
			continue
		}
		insts[i] = inst
	}
	return insts, errs
}

// candidatePath is the path of candidate i in the deployment.
func candidatePath(dep *config.Deployment, i int) string {
	if len(dep.Candidates) == 1 {
		return "deployment.effects"
	}
	return fmt.Sprintf("deployment.effects.candidates[%d]", i)
}

// candidateError is the refusal for candidate i's configuration or run
// parameters: the adapter's refusal (a *sdk.ConfigError) is INVALID at
// its path inside the candidate; anything else means the candidate is not
// available.
func candidateError(dep *config.Deployment, i int, err error) error {
	path := candidatePath(dep, i)
	if ce, ok := errors.AsType[*sdk.ConfigError](err); ok {
		if ce.Path != "" {
			path += "." + ce.Path
		}
		return &Error{Kind: Invalid, Path: path, Message: ce.Message}
	}
	return &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: fmt.Sprintf("candidate %d (%s) is not available: %v", i, dep.Candidates[i].Kind, err)}
}

// Begin starts a session, or refuses it. A refusal of kind Refused means the
// client must not actuate.
func (m *Manager) Begin(ctx context.Context, req BeginRequest) (res *BeginResult, err error) {
	ctx, span := telemetry.Start(ctx, telemetry.SpanBegin, telemetry.KeyDeployment.String(req.DeploymentName))
	start := time.Now()
	defer func() { m.observeBegin(req, res, err, time.Since(start)); endBegin(span, res, err) }()
	// The trust checks come first: nothing is configured or read for a
	// request the operator's rules refuse.
	a, err := m.admit(req)
	if err != nil {
		return nil, m.recordBeginRefusal(ctx, req, nil, err)
	}
	res, err = m.begin(ctx, req, a)
	if err != nil {
		return nil, m.recordBeginRefusal(ctx, req, a.deployment, err)
	}
	return res, nil
}

func (m *Manager) begin(ctx context.Context, req BeginRequest, a *admitted) (*BeginResult, error) {
	params := req.Params
	if params == nil {
		params = map[string]string{}
	}
	dep, contracts, err := parse(a.deployment, a.effects, params)
	if err != nil {
		return nil, err
	}
	// The run parameters are not checked in a round trip of their own:
	// each selected candidate's baseline capture binds them first and
	// refuses as CheckParams would (below); only a candidate that is not
	// read is asked.
	insts, errs := m.configureTraced(ctx, dep, contracts, params, true)
	for _, err := range errs {
		if err != nil {
			// Every candidate must be constructible before input: a
			// missing secret or a broken plugin refuses the run.
			return nil, err
		}
	}

	// Select per effect the strongest tier; ties go to declaration order.
	id := newID()
	res := &BeginResult{SessionID: id, Effects: make([]BegunEffect, len(contracts)), Registered: a.registered}
	byCandidate := map[int][]int{}
	for i, c := range contracts {
		best := -1
		for ci, inst := range insts {
			if best < 0 || inst.Info().Tier < insts[best].Info().Tier {
				best = ci
			}
		}
		res.Effects[i] = BegunEffect{ContractHash: c.Hash, Tier: int(insts[best].Info().Tier), Candidate: dep.Candidates[best].Kind, CandidateIndex: best}
		byCandidate[best] = append(byCandidate[best], i)
	}
	// The tier is the adapter's (GetInfo), never the deployment's: refuse
	// a weaker one than the policy allows before anything is read.
	if err := checkTiers(a.policy, res); err != nil {
		return nil, err
	}
	// A change claim over a narrowed read must prove its newness.
	if err := checkNewness(a.policy, dep, a.effects, res); err != nil {
		return nil, err
	}
	res.UnusedParams = unusedParams(params, dep, a.effects)

	md := meta{ID: id, DeploymentName: req.DeploymentName, BegunAt: time.Now().UTC(), Deployment: a.deployment, Effects: a.effects, Params: params, Begin: *res}
	md.IrreversibleStep = a.registeredIrreversible || irreversibleStep(contracts)
	if md.IrreversibleStep {
		md.SettleFloorS = a.policy.MinSettleS
	}
	var writers []store.BaselineWriter
	// In candidate order, so that the first candidate whose run parameters
	// do not bind is the one refused, as when each was asked in turn: a
	// candidate that is read binds them in its baseline capture (nothing
	// is read when they do not), one that is not read is asked.
	n := 0
	for ci, inst := range insts {
		effects, read := byCandidate[ci]
		if !read {
			if err := inst.CheckParams(ctx); err != nil {
				if n > 0 { // an earlier candidate's baseline was read
					m.dropBaseline(ctx, id)
				}
				return nil, candidateError(dep, ci, err)
			}
			continue
		}
		cm, w, err := m.captureBaseline(ctx, id, n, inst, contracts, effects, dep.Candidates[ci].Redaction, m.secretMask(&dep.Candidates[ci]))
		n++
		if err != nil {
			// Nothing of a refused session is kept: the chunks of the
			// baselines captured before are dropped.
			m.dropBaseline(ctx, id)
			if _, refused := errors.AsType[*sdk.ConfigError](err); refused {
				return nil, candidateError(dep, ci, err)
			}
			return nil, err
		}
		if w != nil {
			writers = append(writers, w)
		}
		cm.Candidate = ci
		census, cw, err := m.captureCensus(ctx, id, n-1, dep, ci, contracts, effects)
		if err != nil {
			m.dropBaseline(ctx, id)
			return nil, err
		}
		if cw != nil {
			writers = append(writers, cw)
		}
		cm.Census = census
		md.Captures = append(md.Captures, cm)
	}
	raw, err := json.Marshal(md)
	if err != nil {
		m.dropBaseline(ctx, id)
		return nil, err
	}
	// The ledger's begin entry binds the session id, the contract hashes,
	// tiers and candidates (what Begin answered), never parameter values;
	// the unused-parameter warning is not part of it.
	bound := *res
	bound.UnusedParams = nil
	beginEntry := func(l store.Ledger) error {
		_, err := l.Append(EntryBegin, id, jsonDigest(&bound))
		return err
	}
	_, span := telemetry.Start(ctx, telemetry.SpanStoreCreate, telemetry.KeySession.String(id))
	err = m.Store.CreateSessionLedger(ctx, id, raw, beginEntry, writers...)
	endErr(span, err)
	if err != nil {
		m.dropBaseline(ctx, id)
		return nil, fmt.Errorf("storing session: %w", err)
	}
	return res, nil
}

// irreversibleStep reports whether any of the step's effects is
// irreversible.
func irreversibleStep(contracts []*judge.Contract) bool {
	for _, c := range contracts {
		if c.Risk == judge.Irreversible {
			return true
		}
	}
	return false
}

// readBudget is the least time one after read may take. timeout_s is the
// settlement window (how long Verify waits for the write to show), not a
// budget for one read: a read that needs a connection, a login and a
// listing must not fail only because the window is short, or a loaded
// machine turns a clear REFUTED into an unreachable system of record.
const readBudget = 10 * time.Second

// readGrace is how much longer the daemon waits for an after read than the
// capture's Timeout tells the adapter, so that an adapter keeping to its
// Timeout answers with its own reason before the daemon gives up on it.
const readGrace = 2 * time.Second

// readTimeout bounds one after read: the settlement window, or readBudget
// when that is longer.
func readTimeout(window time.Duration) time.Duration {
	return max(window, readBudget)
}

// baselineReadTimeout bounds a baseline read: at least a minute, or the
// step's longest settlement window if that is longer.
func baselineReadTimeout(contracts []*judge.Contract) time.Duration {
	return max(time.Minute, effectTimeout(contracts))
}

// captureBaseline reads one selected adapter's baseline once, streaming its
// records into the store. A needed baseline that cannot be read completely
// refuses the session.
func (m *Manager) captureBaseline(ctx context.Context, id string, n int, inst *pluginhost.Instance, contracts []*judge.Contract, effects []int, redaction judge.Redaction, secrets secretMask) (captureMeta, store.BaselineWriter, error) {
	cm := captureMeta{Effects: effects}
	var needed []string
	for _, i := range effects {
		if judge.NeedsBaseline(contracts[i]) {
			needed = append(needed, fmt.Sprintf("effects[%d]", i))
		}
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanCaptureBefore, append(effectAttrs(contracts, effects),
		telemetry.KeySession.String(id), telemetry.KeyGroup.Int(n),
		telemetry.KeyKind.String(inst.Kind()), telemetry.KeyTier.Int(int(inst.Info().Tier)))...)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, baselineReadTimeout(contracts))
	defer cancel()
	sb, err := m.streamBaseline(ctx, id, n, inst, captureRequest(id, "before", n, contracts, effects), groupOf(contracts, effects), redaction, secrets)
	reason, count, w := sb.reason, sb.count, sb.w
	if ce, refused := errors.AsType[*sdk.ConfigError](err); refused {
		// The run parameters do not bind (nothing was read): the
		// session is refused as invalid input, as CheckParams refuses.
		telemetry.Fail(span, "params_refused")
		return cm, nil, ce
	}
	cm.Records = count
	telemetry.Set(span, telemetry.KeyRecords.Int(count), telemetry.KeyReachable.Bool(err == nil && reason == ""))
	if err != nil {
		telemetry.Fail(span, "capture_failed")
	}
	if err != nil {
		reason = err.Error()
	}
	// Adapter text, kept in the store and shown to the client.
	reason = secrets.text(redaction.RedactText(reason, groupOf(contracts, effects)))
	if redaction.Active() {
		cm.KeyID = judge.KeyID(m.evidenceKey())
	}
	cm.Reachable = reason == ""
	cm.Reason = reason
	if cm.Reachable && sb.indexed {
		cm.Index, cm.Digest, cm.DigestKeyID = baselineIndexV1, sb.digest, judge.KeyID(m.EvidenceDigestKey())
	}
	if !cm.Reachable && len(needed) > 0 {
		return cm, nil, &Error{Kind: Refused, Path: strings.Join(needed, ", "),
			Message: fmt.Sprintf("the baseline from %s could not be read (%s) and these contracts need it; do not actuate", inst.Kind(), reason)}
	}
	if !cm.Reachable {
		w = nil
	}
	return cm, w, nil
}

// streamedBaseline is what streamBaseline stored.
type streamedBaseline struct {
	reason  string // "" when read completely
	count   int
	w       store.BaselineWriter // its last chunk is committed by CreateSession
	indexed bool                 // stored as an index (judge.Indexer)
	digest  string               // an index's read digest ("" if a record did not decode)
}

// streamBaseline copies a capture into the store. Without a redaction
// policy (group.projection's condition) the records are stored as an
// index: each kept only as far as the group's contracts read it
// (judge.ProjectBaseline), the read's digest taken from the whole records
// as they arrive; under one, whole (keyed where the policy hides values).
//
// A record that carries one of the candidate's secret values is stored
// with a placeholder in place of the value (secretMask), which Verify
// restores: the store never holds a credential, and the baseline's digest
// is taken over what is stored.
func (m *Manager) streamBaseline(ctx context.Context, id string, n int, inst *pluginhost.Instance, req sdk.CaptureRequest, group []*judge.Contract, redaction judge.Redaction, secrets secretMask) (streamedBaseline, error) {
	capt, err := inst.CaptureBefore(ctx, req)
	if err != nil {
		return streamedBaseline{}, err
	}
	defer capt.Close()
	if !capt.Reachable {
		// Drain the stream (an unreachable read has no batches).
		for _, err := range capt.RawBatches() {
			if err != nil {
				break
			}
		}
		if capt.Reason == "" {
			return streamedBaseline{reason: "unreachable"}, nil
		}
		return streamedBaseline{reason: capt.Reason}, nil
	}
	w := m.Store.NewBaseline(id, n)
	keyer := m.newBaselineKeyer(redaction) // nil when nothing is hidden
	var ix *judge.Indexer
	var mac hash.Hash
	if !redaction.Active() {
		mac = judge.NewKeyedHash(m.EvidenceDigestKey())
		ix = judge.NewIndexer(judge.ProjectBaseline(group), mac)
	}
	count, size := 0, 0
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return streamedBaseline{count: count}, keyer.maskErr(err)
		}
		for _, rec := range batch {
			if rec, err = secrets.storeRaw(rec); err != nil {
				return streamedBaseline{count: count}, fmt.Errorf("masking a secret in a baseline record: %w", err)
			}
			switch {
			case ix != nil:
				size += len(rec) // as the adapter sent it
				rec = ix.Entry(rec)
			case keyer != nil:
				// The store never holds a hidden value in clear.
				if rec, err = keyer.key(rec); err != nil {
					return streamedBaseline{count: count}, err
				}
			}
			if err := w.Add(ctx, rec); err != nil {
				return streamedBaseline{count: count}, fmt.Errorf("storing the baseline: %w", err)
			}
			count++
			if ix == nil {
				size += len(rec)
			}
		}
	}
	m.Metrics.Captured(inst.Kind(), "before", count, size)
	out := streamedBaseline{count: count, w: w, indexed: ix != nil}
	if ix != nil && ix.Err() == nil {
		// A record that did not decode is stored as it arrived, and no
		// digest: Verify finds the baseline unreadable, as it would have
		// found the record.
		out.digest = judge.KeyedSum(mac)
	}
	return out, nil
}

func captureRequest(id, phase string, n int, contracts []*judge.Contract, effects []int) sdk.CaptureRequest {
	req := sdk.CaptureRequest{
		CaptureID:   fmt.Sprintf("%s/%s/%d/%d", id, phase, n, time.Now().UnixNano()),
		EffectIndex: effects[0],
		Timeout:     readTimeout(effectTimeout(contracts)),
	}
	// One read serves every effect of the group; a selector or identity
	// field is only a hint when every effect of the group agrees on it.
	first := contracts[effects[0]]
	req.IdentityField = first.IdentityField
	req.ContractHash = first.Hash
	req.EffectKind = string(first.Kind)
	if len(effects) == 1 {
		req.Selector = map[string]string{}
		for _, p := range first.Match {
			req.Selector[p.Field] = p.Value
		}
	}
	for _, i := range effects[1:] {
		if contracts[i].IdentityField != first.IdentityField {
			req.IdentityField = ""
		}
	}
	return req
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "ses_" + hex.EncodeToString(b[:])
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// dropTimeout bounds the removal of an uncommitted baseline.
const dropTimeout = 10 * time.Second

// dropBaseline removes the chunks of a Begin that did not commit, even
// when the Begin failed because its ctx ended (within dropTimeout). A
// failure leaves orphans that the store's cleanup removes later.
func (m *Manager) dropBaseline(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	if err := m.Store.DropBaseline(ctx, id); err != nil {
		m.logger().Warn("dropping an uncommitted baseline; the orphan cleanup will remove it", "session", id, "error", err)
	}
}

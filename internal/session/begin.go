package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk/refusal"
)

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
	// RunID begins Step as a step of a run (BeginRun): the workflow and
	// the deployment come from the run, so Workflow, DeploymentName,
	// Deployment and Effects stay empty, and Params holds the step's own
	// parameters only (internal/runs).
	RunID string

	// run is what the runs service binds into the session (RunHost.Begin;
	// nil outside a run).
	run *receipt.RunBinding
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
	// Run binds the session to a step of a run, with the handed-off
	// values' digests and the consumed artifacts' exact digests; nil
	// outside a run. A run's session keeps its baseline after any result,
	// for the run's rollback check.
	Run *receipt.RunBinding `json:"run,omitempty"`
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
	// as the adapter sent it; baselineIndexV1, an index (judge.RecordStream.Index):
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
	// Changes is the write set's Begin position (writeset.go); nil for a
	// candidate without changes:.
	Changes *writeSetMeta `json:"changes,omitempty"`
}

// baselineIndexV1 is captureMeta.Index of a baseline stored as an index.
const baselineIndexV1 = 1

// deployments resolves the deployment a call names or sends: a registered
// one by its name in the daemon config, or, with the development switch
// (allowInline), the caller's own YAML, logged as accepted; and admits a
// Begin under the trust rules (admit, trust.go), with the contracts of the
// registered workflows.
type deployments struct {
	daemon      *config.Daemon // may be nil: none is registered
	allowInline bool
	logger      hclog.Logger
	workflows   map[string]*workflow.Workflow
}

// deployments is the Manager's deployment resolver.
func (m *Manager) deployments() deployments {
	return deployments{daemon: m.daemon, allowInline: m.allowInline, logger: m.logger, workflows: m.workflows}
}

// bytes is the deployment YAML req names or sends, inline or not (source
// applies the trust rule).
func (d deployments) bytes(req BeginRequest) ([]byte, error) {
	if req.DeploymentName == "" {
		if len(req.Deployment) == 0 {
			return nil, &Error{Kind: Invalid, Path: "deployment", Message: "give the deployment YAML or the name of a deployment in the daemon config"}
		}
		return req.Deployment, nil
	}
	if len(req.Deployment) > 0 {
		return nil, &Error{Kind: Invalid, Path: "deployment", Message: "give the deployment YAML or its name, not both"}
	}
	return registeredDeployment(d.daemon, req.DeploymentName)
}

// registeredDeployment reads the deployment registered under name in
// daemon (which may be nil: none is registered).
func registeredDeployment(daemon *config.Daemon, name string) ([]byte, error) {
	if len(name) > MaxNameBytes {
		return nil, overLimit("deployment_name", len(name), MaxNameBytes, "bytes", "name a deployment of the daemon config")
	}
	var path string
	if daemon != nil {
		path = daemon.Deployments[name]
	}
	if path == "" {
		return nil, &Error{Kind: Invalid, Path: "deployment_name", Message: fmt.Sprintf("no deployment named %q in the daemon config", clip(name))}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Kind: Refused, Reason: reasonPlatform, Path: "deployment_name", Message: fmt.Sprintf("reading deployment %q: %v", name, err)}
	}
	return data, nil
}

// Begin starts a session, or refuses it. A refusal of kind Refused means the
// client must not actuate.
func (m *Manager) Begin(ctx context.Context, req BeginRequest) (res *BeginResult, err error) {
	ctx, span := telemetry.Start(ctx, telemetry.SpanBegin, telemetry.KeyDeployment.String(req.DeploymentName))
	start := time.Now()
	defer func() {
		observer{m.metrics, m.logger}.begin(req, res, err, time.Since(start))
		endBegin(span, res, err)
	}()
	if req.RunID != "" {
		steps := m.runHost.stepBeginner()
		if steps == nil {
			return nil, errNoRuns()
		}
		res, err = steps.BeginStep(ctx, req)
		if err == nil || !isKind(err, Invalid) {
			// The log names what the run's step began under.
			req.DeploymentName, req.Workflow = steps.RunNames(ctx, req.RunID)
		}
		return res, err
	}
	// The trust checks come first: nothing is configured or read for a
	// request the operator's rules refuse.
	a, err := m.deployments().admit(req)
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
	for _, n := range dep.TakeNotices() {
		m.logger.Warn("deployment notice: "+n.Message, "deployment", req.DeploymentName, "path", n.Path)
	}
	// The run parameters are not checked in a round trip of their own:
	// each selected candidate's baseline capture binds them first and
	// refuses as CheckParams would (below); only a candidate that is not
	// read is asked.
	insts, errs := m.configure(ctx, dep, contracts, params, forSession)
	for _, err := range errs {
		if err != nil {
			// Every candidate must be constructible before input: a
			// missing secret or a broken plugin refuses the run.
			return nil, err
		}
	}

	id := newID()
	res, byCandidate := selectTiers(id, dep, contracts, insts)
	res.Registered = a.registered
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

	md := meta{ID: id, DeploymentName: req.DeploymentName, BegunAt: time.Now().UTC(), Deployment: a.deployment, Effects: a.effects, Params: params, Begin: *res, Run: req.run}
	md.IrreversibleStep = a.registeredIrreversible || irreversibleStep(contracts)
	if md.IrreversibleStep {
		md.SettleFloorS = a.policy.MinSettleS
	}
	writers, err := m.captureSelected(ctx, &md, dep, contracts, insts, byCandidate)
	if err != nil {
		return nil, err
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
	err = m.store.CreateSessionLedger(ctx, id, raw, beginEntry, writers...)
	endErr(span, err)
	if err != nil {
		m.dropBaseline(ctx, id)
		return nil, fmt.Errorf("storing session: %w", err)
	}
	return res, nil
}

// selectTiers selects per effect the strongest tier among the configured
// candidates; ties go to declaration order. It returns what Begin answers
// and, per selected candidate, the indices of the effects it reads.
func selectTiers(id string, dep *config.Deployment, contracts []*judge.Contract, insts []*pluginhost.Instance) (*BeginResult, map[int][]int) {
	res := &BeginResult{SessionID: id, Effects: make([]BegunEffect, len(contracts))}
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
	return res, byCandidate
}

// captureSelected captures the baseline (and census) of every selected
// candidate into md.Captures and asks every other candidate whether the run
// parameters bind. It returns the writers whose last chunks the session's
// creation commits; on an error nothing captured is kept.
func (m *Manager) captureSelected(ctx context.Context, md *meta, dep *config.Deployment, contracts []*judge.Contract, insts []*pluginhost.Instance, byCandidate map[int][]int) ([]store.BaselineWriter, error) {
	id := md.ID
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
			if _, refused := errors.AsType[*refusal.Error](err); refused {
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
		if cm.Changes, err = m.beginWriteSet(ctx, md.ID, n-1, md, dep, ci, groupOf(contracts, effects)); err != nil {
			m.dropBaseline(ctx, md.ID)
			return nil, err
		}
		md.Captures = append(md.Captures, cm)
	}
	return writers, nil
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

package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// Service is the runs service (docs/runs.md): BeginRun, FinishRun, GetRun,
// ListRuns, RollbackCheck, VerifyRunArtifact, and the binding of a run's
// steps that Begin asks it for (BeginStep). It reaches sessions, the
// store and the one judging path (internal/session, proof.go) only through
// a session.RunHost, and judges nothing itself. It keeps no state of its
// own: every run is in the store.
type Service struct {
	h *session.RunHost
}

// New makes the runs service over h and attaches it to h, so that a
// session Begin with a RunID is a step of a run (session.RunHost.Attach:
// the first service attached answers; every one over h is equivalent).
func New(h *session.RunHost) *Service {
	svc := &Service{h: h}
	h.Attach(svc)
	return svc
}

// For is New over m's RunHost.
func For(m *session.Manager) *Service { return New(m.RunHost()) }

// Refusal codes of a step of a run (FailedPrecondition; the Begin is
// recorded as REJECTED_POLICY).
const (
	// CodeStepOutOfOrder: a step listed in after:, or a handoff's source
	// step, has no VERIFIED session in the run yet.
	CodeStepOutOfOrder = "step_out_of_order"
	// CodeArtifactUnverified: a consumed artifact is not CONFIRMED in the
	// run.
	CodeArtifactUnverified = "artifact_unverified"
	// CodeHandoffForged: the caller sent a value for a parameter the run
	// hands off from an earlier step.
	CodeHandoffForged = "handoff_forged"
	// CodeHandoffAmbiguous: the handoff's source effect matched zero or
	// several records, or the one it matched has no usable value in the
	// field.
	CodeHandoffAmbiguous = "handoff_ambiguous"
	// CodeRunParamOverridden: a step parameter names a run parameter.
	CodeRunParamOverridden = "run_param_overridden"
	// CodeStepAlreadyBegun: the step already has a session in the run
	// that did not end HALTED_BEFORE_EFFECT.
	CodeStepAlreadyBegun = "step_already_begun"
	// CodeRunSealed: the run is sealed with an outcome other than
	// RECONCILIATION_REQUIRED and takes no further step (a run sealed
	// RECONCILIATION_REQUIRED goes on until it is sealed again).
	CodeRunSealed = "run_sealed"
	// CodeNothingToRollBack: a rollback check of a run with no session.
	CodeNothingToRollBack = "nothing_to_roll_back"
	// CodeWorkflowChanged: the registered workflow is no longer the file
	// the run began with.
	CodeWorkflowChanged = "workflow_changed"
	// CodeDeploymentChanged: the registered deployment is no longer the
	// file the run began with (its digest is in the run receipt).
	CodeDeploymentChanged = "deployment_changed"
	// CodeArtifactConsumed: VerifyArtifact of other bytes under the name
	// of an artifact a step of the run already consumed.
	CodeArtifactConsumed = "artifact_consumed"
)

// Ledger entry types of runs.
const (
	EntryRunBegun       = "run_begun"
	EntryRunStepBound   = "run_step_bound"
	EntryRunStepRefused = "run_step_refused"
	EntryRunArtifact    = "run_artifact"
	EntryRunSealed      = "run_sealed"
)

// Run states.
const (
	RunOpen   = "open"
	RunSealed = "sealed"
)

// MaxRunIDBytes bounds a client-chosen run id.
const MaxRunIDBytes = 128

// runRecord is a run as the store keeps it (store.Backend's runs).
type runRecord struct {
	ID               string            `json:"id"`
	Workflow         string            `json:"workflow"`
	WorkflowDigest   string            `json:"workflow_digest"`
	DeploymentName   string            `json:"deployment_name"`
	DeploymentDigest string            `json:"deployment_digest"`
	Params           map[string]string `json:"params"`
	// RunMinTier is the policy's run_min_tier, resolved at BeginRun.
	RunMinTier int `json:"run_min_tier"`
	// RunMinRung is the policy's run_min_rung, resolved at BeginRun.
	RunMinRung int              `json:"run_min_rung"`
	BegunAt    time.Time        `json:"begun_at"`
	Steps      []runStepRecord  `json:"steps"`
	Artifacts  []runArtifactRec `json:"artifacts"`
	// Sticky: an artifact check failed in the run (run.Input.Sticky).
	Sticky bool `json:"sticky,omitempty"`
	// Attempt counts the seals; Seal is the latest (nil while open).
	Attempt int      `json:"attempt"`
	Seal    *runSeal `json:"seal,omitempty"`
}

type runStepRecord struct {
	Step string `json:"step"`
	// Sessions are the step's sessions in the run, oldest first.
	Sessions []string               `json:"sessions"`
	Handoffs []receipt.HandoffBound `json:"handoffs,omitempty"`
	// Consumed are the artifacts the step's latest session consumed, at
	// the digests it bound.
	Consumed []receipt.ConsumedBound `json:"consumed,omitempty"`
	// Refused is the terminal outcome of the latest refused Begin of the
	// step since its latest session ("" when none).
	Refused string `json:"refused,omitempty"`
}

type runArtifactRec struct {
	Artifact      string `json:"artifact"`
	FromStep      string `json:"from_step"`
	Verdict       string `json:"verdict,omitempty"`
	SHA256        string `json:"sha256,omitempty"`
	Size          int64  `json:"size,omitempty"`
	ReceiptDigest string `json:"receipt_digest,omitempty"`
	// DeploymentName and Name: where and under which file name the
	// CONFIRMED check read the document (a rollback check reads it again).
	DeploymentName string `json:"deployment_name,omitempty"`
	Name           string `json:"name,omitempty"`
}

type runSeal struct {
	Outcome    string       `json:"outcome"`
	Reasons    []run.Reason `json:"reasons,omitempty"`
	Tier       int          `json:"tier"`
	OracleRung int          `json:"oracle_rung"`
	SealedAt   time.Time    `json:"sealed_at"`
	// InputDigest is the digest of the classifier's input: FinishRun of a
	// run sealed RECONCILIATION_REQUIRED re-seals only when it changed.
	InputDigest string          `json:"input_digest"`
	Receipt     json.RawMessage `json:"receipt,omitempty"`
}

func (r *runRecord) step(name string) *runStepRecord {
	for i := range r.Steps {
		if r.Steps[i].Step == name {
			return &r.Steps[i]
		}
	}
	return nil
}

func (r *runRecord) artifact(name string) *runArtifactRec {
	for i := range r.Artifacts {
		if r.Artifacts[i].Artifact == name {
			return &r.Artifacts[i]
		}
	}
	return nil
}

// reconciling: sealed RECONCILIATION_REQUIRED, the one sealed state that
// may change again (a Reverify, then FinishRun).
func (r *runRecord) reconciling() bool {
	return r.Seal != nil && r.Seal.Outcome == run.ReconciliationRequired
}

// BeginRunRequest opens a run.
type BeginRunRequest struct {
	Workflow       string
	DeploymentName string
	Params         map[string]string
	// RunID is optional: a client-chosen id makes BeginRun idempotent.
	RunID string
}

// RunView is a run as GetRun, FinishRun and RollbackCheck report it.
type RunView struct {
	RunID          string `json:"run_id"`
	Workflow       string `json:"workflow"`
	DeploymentName string `json:"deployment_name"`
	State          string `json:"state"`
	// Outcome, Attempt, Reasons: the latest seal ("" and 0 while open).
	Outcome string       `json:"outcome,omitempty"`
	Attempt int          `json:"attempt"`
	Reasons []run.Reason `json:"reasons,omitempty"`
	// Tier and OracleRung: of the steps as they stand now.
	Tier       int               `json:"tier"`
	OracleRung int               `json:"oracle_rung"`
	Steps      []RunStepView     `json:"steps"`
	Artifacts  []RunArtifactView `json:"artifacts"`
	BegunAt    time.Time         `json:"begun_at"`
	SealedAt   time.Time         `json:"sealed_at"`
	// Receipt is the latest run receipt (a DSSE envelope; nil while open
	// or without a signing key).
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

// RunStepView is one workflow step of a run.
type RunStepView struct {
	Step          string `json:"step"`
	Consequential bool   `json:"consequential"`
	SessionID     string `json:"session_id,omitempty"`
	Outcome       string `json:"outcome,omitempty"`
	Tier          int    `json:"tier"`
	OracleRung    int    `json:"oracle_rung"`
	ReceiptDigest string `json:"receipt_digest,omitempty"`
}

// RunArtifactView is one artifact edge of a run.
type RunArtifactView struct {
	Artifact      string `json:"artifact"`
	FromStep      string `json:"from_step"`
	Verdict       string `json:"verdict,omitempty"`
	SHA256        string `json:"sha256,omitempty"`
	Size          int64  `json:"size"`
	ReceiptDigest string `json:"receipt_digest,omitempty"`
}

// RollbackResult is RollbackCheck's answer.
type RollbackResult struct {
	RolledBack bool
	Run        *RunView
	// Remains lists every effect whose change is still there or could
	// not be shown gone (empty when RolledBack).
	Remains []run.EffectCheck
}

// CheckRunID checks a client-chosen run id: 1 to 128 of [A-Za-z0-9._-].
func CheckRunID(id string) error {
	if id == "" {
		return &session.Error{Kind: session.Invalid, Path: "run_id", Message: "give the run id BeginRun returned"}
	}
	if len(id) > MaxRunIDBytes {
		return overLimit("run_id", len(id), MaxRunIDBytes, "bytes", "a run id is 1 to 128 of A-Z a-z 0-9 . _ -")
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return &session.Error{Kind: session.Invalid, Path: "run_id", Message: "a run id is 1 to 128 of A-Z a-z 0-9 . _ -"}
		}
	}
	return nil
}

func newRunID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "run_" + hex.EncodeToString(b[:])
}

// BeginRun opens a run of a registered workflow against a registered
// deployment and returns its id. The same client-chosen id with the same
// workflow, deployment and parameters answers the run already stored; with
// other arguments it is refused (Exists).
func (svc *Service) BeginRun(ctx context.Context, req BeginRunRequest) (string, error) {
	id := req.RunID
	if id == "" {
		id = newRunID()
	} else if err := CheckRunID(id); err != nil {
		return "", err
	}
	if err := svc.h.CheckParams(req.Params); err != nil {
		return "", err
	}
	if req.Workflow == "" {
		return "", &session.Error{Kind: session.Invalid, Path: "workflow", Message: "name a workflow registered in the daemon config (workflows:)"}
	}
	wf := svc.h.Workflow(req.Workflow)
	if wf == nil {
		return "", &session.Error{Kind: session.Invalid, Path: "workflow", Message: fmt.Sprintf("no workflow named %q in the daemon config (workflows:)", clip(req.Workflow))}
	}
	if req.DeploymentName == "" {
		return "", &session.Error{Kind: session.Invalid, Path: "deployment_name", Message: "name a deployment registered in the daemon config (deployments:); a run reads only registered deployments"}
	}
	raw, err := svc.h.Deployment(req.DeploymentName)
	if err != nil {
		return "", err
	}
	minTier, minRung, err := svc.h.RunMins(raw, wf)
	if err != nil {
		return "", err
	}
	params := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(req.Params)) {
		if _, declared := wf.Params[k]; !declared {
			return "", &session.Error{Kind: session.Invalid, Path: "params." + clip(k), Message: fmt.Sprintf("workflow %q declares no parameter %q under params:", req.Workflow, clip(k))}
		}
		for _, s := range wf.Steps {
			if h, ok := s.Handoff(k); ok {
				return "", &session.Error{Kind: session.Refused, Reason: session.ReasonPolicy, Code: CodeHandoffForged, Path: "params." + k,
					Message: fmt.Sprintf("step %q takes %q from step %q's evidence (handoffs:); the caller may not send it", s.Name, k, h.From.Step)}
			}
		}
		params[k] = req.Params[k]
	}
	rec := runRecord{
		ID: id, Workflow: req.Workflow, WorkflowDigest: wf.Digest, DeploymentName: req.DeploymentName, DeploymentDigest: sha256Hex(raw),
		Params: params, RunMinTier: minTier, RunMinRung: minRung, BegunAt: time.Now().UTC(),
	}
	for _, s := range wf.Steps {
		rec.Steps = append(rec.Steps, runStepRecord{Step: s.Name, Sessions: []string{}})
	}
	for _, a := range wf.Artifacts() {
		rec.Artifacts = append(rec.Artifacts, runArtifactRec{Artifact: a.Artifact, FromStep: a.FromStep})
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	stored, created, err := svc.h.Store().CreateRun(ctx, id, body, func(l store.Ledger) error {
		_, err := l.Append(EntryRunBegun, id, jsonDigest(map[string]any{
			"run_id": id, "workflow": rec.Workflow, "workflow_digest": rec.WorkflowDigest,
			"deployment_name": rec.DeploymentName, "deployment_digest": rec.DeploymentDigest,
			"params_digest": svc.paramsDigest(params, wf.SecretParams()), "run_min_tier": rec.RunMinTier, "run_min_rung": rec.RunMinRung,
		}))
		return err
	})
	if err != nil {
		return "", err
	}
	if created {
		return id, nil
	}
	var have runRecord
	if err := json.Unmarshal(stored, &have); err != nil {
		return "", fmt.Errorf("run %s is corrupt: %w", id, err)
	}
	if have.Workflow != rec.Workflow || have.DeploymentName != rec.DeploymentName || !maps.Equal(have.Params, rec.Params) {
		return "", &session.Error{Kind: session.Exists, Path: "run_id", Message: fmt.Sprintf("run %q was begun with another workflow, deployment or parameters; choose a new run id", id)}
	}
	return id, nil
}

// handoffDigest is the keyed digest of a handed-off value's JSON (a JSON
// string).
func (svc *Service) handoffDigest(value string) string {
	b, _ := json.Marshal(value) // a string always encodes
	return svc.h.KeyedDigest(b)
}

// paramsDigest is the keyed digest of a run's parameters (canonical JSON:
// keys sorted). A parameter the workflow marks secret is digested by its
// name only (its value replaced by session.SecretMarker): a secret is never hashed.
func (svc *Service) paramsDigest(params map[string]string, secret map[string]bool) string {
	params = maps.Clone(params)
	for k := range params {
		if secret[k] {
			params[k] = session.SecretMarker
		}
	}
	b, _ := json.Marshal(params) // a map's keys are written sorted
	return svc.h.KeyedDigest(b)
}

// loadRun reads a run.
func (svc *Service) loadRun(ctx context.Context, id string) (*runRecord, error) {
	if err := CheckRunID(id); err != nil {
		return nil, err
	}
	raw, err := svc.h.Store().Run(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrRunNotFound) {
			return nil, &session.Error{Kind: session.NotFound, Path: "run_id", Message: fmt.Sprintf("no run %q", clip(id))}
		}
		return nil, err
	}
	var rec runRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("run %s is corrupt: %w", id, err)
	}
	return &rec, nil
}

// RunNames is a run's deployment and workflow names, for the log (empty
// when the run cannot be read; session.StepBeginner).
func (svc *Service) RunNames(ctx context.Context, id string) (deployment, workflow string) {
	raw, err := svc.h.Store().Run(ctx, id)
	if err != nil {
		return "", ""
	}
	var rec runRecord
	if json.Unmarshal(raw, &rec) != nil {
		return "", ""
	}
	return rec.DeploymentName, rec.Workflow
}

// runWorkflow is the registered workflow a run began with; a workflow
// since changed or gone is refused.
func (svc *Service) runWorkflow(rec *runRecord) (*workflow.Workflow, error) {
	wf := svc.h.Workflow(rec.Workflow)
	if wf == nil || wf.Digest != rec.WorkflowDigest {
		return nil, &session.Error{Kind: session.Refused, Reason: session.ReasonPolicy, Code: CodeWorkflowChanged, Path: "run_id",
			Message: fmt.Sprintf("run %q follows workflow %q as it was (%s); the daemon's registered workflow is no longer that file, so the run cannot go on: begin a new run", rec.ID, rec.Workflow, rec.WorkflowDigest)}
	}
	return wf, nil
}

// stepState is one workflow step as it stands in a run.
type stepState struct {
	run.Step
	SessionID     string
	ReceiptDigest string
	latest        *session.Result
}

// outcomeOf is the terminal outcome a result records.
func outcomeOf(r *session.Result) string {
	if r.TerminalOutcome != "" {
		return r.TerminalOutcome
	}
	return string(r.Outcome)
}

// stepStates reads every step's latest session and its latest result.
func (svc *Service) stepStates(ctx context.Context, wf *workflow.Workflow, rec *runRecord) ([]stepState, error) {
	out := make([]stepState, len(wf.Steps))
	for i := range wf.Steps {
		s := &wf.Steps[i]
		st := stepState{Step: run.Step{Name: s.Name, Consequential: s.Consequential()}}
		if rs := rec.step(s.Name); rs != nil {
			st.Refused = rs.Refused
			for _, sid := range slices.Backward(rs.Sessions) {
				r, found, err := svc.h.LatestResult(ctx, sid)
				if err != nil {
					return nil, err
				}
				// A bound session the store no longer has (removed by
				// the retention) is a doubt: the step began and its
				// result is unknown; an older session does not stand in.
				st.Began, st.SessionID, st.latest = true, sid, r
				if !found {
					break
				}
				if r != nil {
					st.Outcome = outcomeOf(r)
					st.Tier, st.OracleRung = session.ResultTier(r)
					if len(r.Receipt) > 0 {
						st.ReceiptDigest = sha256Hex(r.Receipt)
					}
				}
				break
			}
			if err := svc.earlierDoubt(ctx, rs, &st); err != nil {
				return nil, err
			}
		}
		out[i] = st
	}
	return out, nil
}

// earlierDoubt puts in st the first earlier session of the step (oldest
// first) whose latest result is neither HALTED_BEFORE_EFFECT nor
// VERIFIED, or that the store no longer has: a step begins again only
// after its sessions ended HALTED_BEFORE_EFFECT, so such a result (a
// Reverify of an earlier attempt that now sees its save, or a duplicate)
// is the step's, whatever its newest session says.
func (svc *Service) earlierDoubt(ctx context.Context, rs *runStepRecord, st *stepState) error {
	for _, sid := range rs.Sessions {
		if sid == st.SessionID {
			return nil
		}
		r, found, err := svc.h.LatestResult(ctx, sid)
		if err != nil {
			return err
		}
		if found && r != nil && (outcomeOf(r) == run.HaltedBeforeEffect || outcomeOf(r) == run.Verified) {
			continue
		}
		st.SessionID, st.latest, st.Outcome, st.Tier, st.OracleRung, st.ReceiptDigest = sid, r, "", 0, 0, ""
		if r != nil {
			st.Outcome = outcomeOf(r)
			st.Tier, st.OracleRung = session.ResultTier(r)
			if len(r.Receipt) > 0 {
				st.ReceiptDigest = sha256Hex(r.Receipt)
			}
		}
		return nil
	}
	return nil
}

func stateOf(states []stepState, name string) *stepState {
	for i := range states {
		if states[i].Name == name {
			return &states[i]
		}
	}
	return nil
}

// handoffValue is the value a handoff takes: field h.From.Field of the one
// record effect h.From.Effect of the source step's latest VERIFIED result
// matched, as a run parameter (a string, a number's text, or true/false).
func handoffValue(src *stepState, h workflow.Handoff) (string, error) {
	if src == nil || src.latest == nil || src.Outcome != run.Verified {
		return "", fmt.Errorf("step %q is not VERIFIED in the run", h.From.Step)
	}
	if h.From.Effect >= len(src.latest.Effects) {
		return "", fmt.Errorf("step %q's result has no effect %d", h.From.Step, h.From.Effect)
	}
	recs := src.latest.Effects[h.From.Effect].MatchedRecords
	if len(recs) != 1 {
		return "", fmt.Errorf("effect %d of step %q matched %d records; a handoff takes its value from exactly one", h.From.Effect, h.From.Step, len(recs))
	}
	v, ok := recs[0][h.From.Field]
	if !ok {
		return "", fmt.Errorf("the record effect %d of step %q matched has no field %q", h.From.Effect, h.From.Step, h.From.Field)
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", fmt.Errorf("field %q of the record effect %d of step %q matched is not a single value (a string, number or boolean)", h.From.Field, h.From.Effect, h.From.Step)
	}
	if s == judge.RedactedMarker || strings.Contains(s, session.SecretMarker) {
		return "", fmt.Errorf("field %q of the record effect %d of step %q matched is redacted in the evidence; hand off a field the deployment keeps", h.From.Field, h.From.Effect, h.From.Step)
	}
	return s, nil
}

// noteRunRefusal records in the run that a Begin of step was refused
// (a policy or platform refusal; the caller's malformed input is not). It
// is best effort: the refusal itself is in the ledger either way.
func (svc *Service) noteRunRefusal(ctx context.Context, runID, step string, err error) {
	var se *session.Error
	if !errors.As(err, &se) || (se.Kind != session.Refused && se.Kind != session.Denied) || se.Code == CodeRunSealed {
		return
	}
	outcome := session.RefusalOutcome(se)
	_, uerr := svc.h.Store().UpdateRun(ctx, runID, func(l store.Ledger, raw []byte) ([]byte, store.RunChange, error) {
		var rec runRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, store.RunChange{}, err
		}
		rs := rec.step(step)
		if (rec.Seal != nil && !rec.reconciling()) || rs == nil {
			return nil, store.RunChange{}, nil
		}
		rs.Refused = outcome
		if _, err := l.Append(EntryRunStepRefused, runID, jsonDigest(map[string]any{"run_id": runID, "step": step, "outcome": outcome, "code": se.Code})); err != nil {
			return nil, store.RunChange{}, err
		}
		out, err := json.Marshal(rec)
		return out, store.RunChange{}, err
	})
	if uerr != nil {
		svc.h.Logger().Error("recording a refused step in its run", "run", runID, "step", step, "error", uerr)
	}
}

// FinishRun classifies a run and seals it with a signed run receipt. A
// run sealed with any outcome but RECONCILIATION_REQUIRED answers its seal
// again. One sealed RECONCILIATION_REQUIRED is classified again: once
// what it depends on changed (a Reverify of the offending step) it is
// re-sealed with the next attempt, VERIFIED or still
// RECONCILIATION_REQUIRED (sticky: never a nothing-landed outcome).
func (svc *Service) FinishRun(ctx context.Context, id string) (*RunView, error) {
	return lockedRun(svc, ctx, id, svc.finishRunOnce)
}

// lockedRun runs once for run id under the run's lock, again while the
// run changed under it (retryRunChanged).
func lockedRun[T any](svc *Service, ctx context.Context, id string, once func(context.Context, string) (T, error)) (T, error) {
	if err := CheckRunID(id); err != nil {
		var zero T
		return zero, err
	}
	unlock, err := svc.h.Lock(ctx, "run/"+id)
	if err != nil {
		var zero T
		return zero, err
	}
	defer unlock()
	return retryRunChanged(func() (T, error) { return once(ctx, id) })
}

// errRunChanged: the run's steps or artifacts changed (a Begin bound a
// session, an artifact was checked, on any replica) between the read a
// seal was decided on and the seal: that seal does not stand.
var errRunChanged = errors.New("the run changed while it was being sealed; call again")

// runChangedTries bounds how often a seal is decided again on a run that
// keeps changing under it.
const runChangedTries = 5

// retryRunChanged calls once until it answers anything but errRunChanged,
// at most runChangedTries times.
func retryRunChanged[T any](once func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := once()
		if !errors.Is(err, errRunChanged) || i == runChangedTries {
			return v, err
		}
	}
}

// RollbackCheck re-reads every session of the run against its original
// baseline. When every effect reads affirmatively absent (no new record
// remains, nothing lost, nothing changed) the run is sealed
// ROLLED_BACK_VERIFIED with a receipt; otherwise the answer lists what
// remains and the run is unchanged.
func (svc *Service) RollbackCheck(ctx context.Context, id string) (*RollbackResult, error) {
	return lockedRun(svc, ctx, id, svc.rollbackCheckOnce)
}

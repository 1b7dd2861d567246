package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// RolledBackVerified is a run's outcome only: every change the run made
// was seen undone by a rollback check.
const RolledBackVerified Outcome = "ROLLED_BACK_VERIFIED"

// RunRequest is what a run is begun for: one registered workflow against
// one registered deployment, with the run parameters bound into every
// step.
type RunRequest struct {
	Workflow   string
	Deployment string
	Params     map[string]string
	// ID is an optional run id of the caller's choosing (1-128 of
	// [A-Za-z0-9._-]): BeginRun with the same id and the same arguments
	// returns the same run, so a caller that lost the answer can ask
	// again; with other arguments it is refused (AlreadyExists).
	ID string
}

// Run is a handle on a run: its steps are begun through it, and Finish
// seals it. It is safe for concurrent use. A run outlives the process that
// began it: OpenRun gives a handle on a run by its id (after a restart).
type Run struct {
	ID         string
	Workflow   string
	Deployment string
	c          *Client
}

// BeginRun opens a run of a registered workflow against a registered
// deployment.
func (c *Client) BeginRun(ctx context.Context, req RunRequest) (*Run, error) {
	if req.Workflow == "" || req.Deployment == "" {
		return nil, errors.New("client.RunRequest: set Workflow and Deployment to a workflow and a deployment of the daemon's configuration")
	}
	res, err := c.api.BeginRun(ctx, &verifierv1.BeginRunRequest{Workflow: req.Workflow, DeploymentName: req.Deployment,
		Params: verifierv1.StringParams(req.Params), RunId: req.ID})
	if err != nil {
		return nil, err
	}
	return &Run{ID: res.GetRunId(), Workflow: req.Workflow, Deployment: req.Deployment, c: c}, nil
}

// OpenRun is a handle on the run id begun earlier (by this process or
// another) with the deployment it was begun with, which the receipts of
// its steps are checked against under WithReceiptKey. It makes no call.
func (c *Client) OpenRun(id, deployment string) *Run {
	return &Run{ID: id, Deployment: deployment, c: c}
}

// Begin opens the session of one step of the run: the workflow and the
// deployment come from the run, params are the step's own parameters
// only. The daemon refuses a step whose `after:` steps are not VERIFIED in
// the run, a consumer whose artifact is not confirmed, and a value for a
// parameter the run binds or a handoff fills: a *Refused, as for Begin.
func (r *Run) Begin(ctx context.Context, step string, params map[string]string) (*Session, error) {
	if step == "" {
		return nil, errors.New("client.Run.Begin: no step; name a step of the run's workflow")
	}
	res, err := r.c.api.Begin(ctx, &verifierv1.BeginRequest{RunId: r.ID, Step: step, Params: verifierv1.StringParams(params)})
	if err != nil {
		return nil, refusal(err)
	}
	return sessionOf(res, Request{Deployment: r.Deployment}), nil
}

// Step is Client.Step for one step of the run: begin the step in the run,
// run action, verify, and nil only when the step is VERIFIED, with the
// same errors (*Refused, *ActionError, *NotConfirmed, *ReceiptError). A
// step's VERIFIED lets the run go on; only Finish says whether the whole
// run is.
func (r *Run) Step(ctx context.Context, step string, params map[string]string, action func(ctx context.Context) error) error {
	return r.c.step(ctx, func(ctx context.Context) (*Session, error) { return r.Begin(ctx, step, params) }, action)
}

// Finish classifies the run from its steps' latest results and seals it
// with a signed run receipt. It returns the run and nil only when the run
// is VERIFIED; any other outcome returns the run and a *RunNotVerified.
// A run sealed RECONCILIATION_REQUIRED goes on: after a Reverify of the
// offending step its remaining steps may begin, and Finish re-seals it
// with the next Attempt.
// With WithReceiptKey the run receipt is checked first (*ReceiptError).
func (r *Run) Finish(ctx context.Context) (*RunResult, error) {
	res, err := r.c.api.FinishRun(ctx, &verifierv1.FinishRunRequest{RunId: r.ID})
	if err != nil {
		return nil, err
	}
	out := runResultOf(res.GetRun(), res.GetReceipt())
	if err := r.c.checkRunReceipt(out); err != nil {
		return nil, err
	}
	if out.Outcome != Verified {
		return out, &RunNotVerified{Run: out}
	}
	return out, nil
}

// GetRun reports the run id: its steps, artifacts and latest receipt
// (none while it was never sealed).
func (c *Client) GetRun(ctx context.Context, id string) (*RunResult, error) {
	res, err := c.api.GetRun(ctx, &verifierv1.GetRunRequest{RunId: id})
	if err != nil {
		return nil, err
	}
	out := runResultOf(res.GetRun(), res.GetReceipt())
	if len(out.Receipt) > 0 {
		if err := c.checkRunReceipt(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RollbackCheck re-reads every begun step of the run id against its
// original baseline. When every change the run made is gone, the run is
// sealed ROLLED_BACK_VERIFIED (Rollback.RolledBack, with the run's new
// receipt); otherwise Remains lists what is still there and the run is
// unchanged.
func (c *Client) RollbackCheck(ctx context.Context, id string) (*Rollback, error) {
	res, err := c.api.RollbackCheck(ctx, &verifierv1.RollbackCheckRequest{RunId: id})
	if err != nil {
		return nil, err
	}
	out := &Rollback{RolledBack: res.GetRolledBack(), Run: runResultOf(res.GetRun(), res.GetReceipt())}
	if out.RolledBack {
		if err := c.checkRunReceipt(out.Run); err != nil {
			return nil, err
		}
	}
	for _, rm := range res.GetRemains() {
		out.Remains = append(out.Remains, Remainder{Step: rm.GetStep(), SessionID: rm.GetSessionId(),
			EffectIndex: int(rm.GetEffectIndex()), ContractHash: rm.GetContractHash(), Reasons: reasonsOf(rm.GetReasons())})
	}
	return out, nil
}

// checkRunReceipt checks a run's receipt under WithReceiptKey.
func (c *Client) checkRunReceipt(r *RunResult) error {
	if c.key == nil {
		return nil
	}
	if _, err := r.CheckReceipt(c.key); err != nil {
		return &ReceiptError{Run: r, Err: err}
	}
	return nil
}

// RunResult is a run as the daemon reports it.
type RunResult struct {
	RunID      string
	Workflow   string
	Deployment string
	// State is "open" (steps may begin) or "sealed".
	State string
	// Outcome is the run classifier's answer: Verified,
	// HaltedBeforeEffect, RejectedPolicy, FailedPlatform,
	// ReconciliationRequired or RolledBackVerified; "" while the run was
	// never sealed.
	Outcome Outcome
	// Attempt counts the seals: 1 on the first Finish.
	Attempt int
	// Tier is the weakest tier of the run's steps (1 strongest), OracleRung
	// the lowest rung; 0 while no step has a result.
	Tier       int
	OracleRung int
	// Steps holds one entry per step of the workflow, in its order.
	Steps     []RunStep
	Artifacts []RunArtifact
	// Reasons say why the outcome is not VERIFIED (step_not_verified,
	// artifact_unverified, tier_below_run_min, …).
	Reasons  []Reason
	BegunAt  time.Time
	SealedAt time.Time
	// Receipt is the latest signed run receipt, a DSSE envelope (JSON);
	// empty while the run was never sealed.
	Receipt []byte
}

// RunStep is one step of the workflow in a run.
type RunStep struct {
	Step string
	// Consequential steps (risk irreversible or reversible) must be
	// VERIFIED for the run to be.
	Consequential bool
	// SessionID is the step's latest session in the run; "" when none.
	SessionID string
	// Outcome is the session's latest result (after any Reverify); ""
	// while not verified.
	Outcome       Outcome
	Tier          int
	OracleRung    int
	ReceiptDigest string
}

// RunArtifact is an artifact edge of the run: what a step produced and
// another consumes.
type RunArtifact struct {
	Artifact string
	FromStep string
	// Verdict is the latest VerifyArtifact verdict in the run; "" while
	// never checked.
	Verdict       string
	SHA256        string
	Size          int64
	ReceiptDigest string
}

// Rollback is what RollbackCheck found.
type Rollback struct {
	RolledBack bool
	Run        *RunResult
	Remains    []Remainder
}

// Remainder is one effect whose change is still there, or could not be
// shown gone.
type Remainder struct {
	Step         string
	SessionID    string
	EffectIndex  int
	ContractHash string
	Reasons      []Reason
}

// CheckReceipt checks that the run's receipt is a run receipt signed by
// pub about this run, and returns its decoded payload.
func (r *RunResult) CheckReceipt(pub []byte) (*receipt.RunPayload, error) {
	if len(r.Receipt) == 0 {
		return nil, errors.New("the run carries no receipt")
	}
	env, err := receipt.ParseEnvelope(r.Receipt)
	if err != nil {
		return nil, err
	}
	return env.OpenRun(pub, r.RunID)
}

// String is the outcome and the run, for logs.
func (r *RunResult) String() string {
	o := r.Outcome
	if o == "" {
		o = "unsealed"
	}
	return fmt.Sprintf("%s (run %s, attempt %d)", o, r.RunID, r.Attempt)
}

// RunNotVerified is a run that Finish sealed with an outcome other than
// VERIFIED: the process as a whole is not proven. Run holds the steps and
// the reasons.
type RunNotVerified struct {
	Run *RunResult
}

func (e *RunNotVerified) Error() string {
	var codes []string
	for _, r := range e.Run.Reasons {
		codes = append(codes, r.Code)
	}
	return fmt.Sprintf("the run is not verified: %s (run %s, attempt %d; %s)", e.Run.Outcome, e.Run.RunID, e.Run.Attempt, strings.Join(codes, ", "))
}

func runResultOf(r *verifierv1.Run, env *structpb.Struct) *RunResult {
	out := &RunResult{RunID: r.GetRunId(), Workflow: r.GetWorkflow(), Deployment: r.GetDeploymentName(),
		State: enum(r.GetState().String(), "RUN_STATE_"), Outcome: Outcome(enum(r.GetOutcome().String(), "OUTCOME_")),
		Attempt: int(r.GetAttempt()), Tier: int(r.GetTier()), OracleRung: int(r.GetOracleRung()),
		Reasons: reasonsOf(r.GetReasons()), BegunAt: when(r.GetBegunAt()), SealedAt: when(r.GetSealedAt())}
	if env != nil {
		out.Receipt = verifierv1.EnvelopeJSON(env)
	}
	for _, s := range r.GetSteps() {
		out.Steps = append(out.Steps, RunStep{Step: s.GetStep(), Consequential: s.GetConsequential(), SessionID: s.GetSessionId(),
			Outcome: Outcome(enum(s.GetOutcome().String(), "OUTCOME_")), Tier: int(s.GetTier()), OracleRung: int(s.GetOracleRung()),
			ReceiptDigest: s.GetReceiptDigest()})
	}
	for _, a := range r.GetArtifacts() {
		out.Artifacts = append(out.Artifacts, RunArtifact{Artifact: a.GetArtifact(), FromStep: a.GetFromStep(),
			Verdict: enum(a.GetVerdict().String(), "VERDICT_"), SHA256: a.GetSha256(), Size: a.GetSize(), ReceiptDigest: a.GetReceiptDigest()})
	}
	return out
}

func reasonsOf(rs []*verifierv1.Reason) []Reason {
	var out []Reason
	for _, r := range rs {
		out = append(out, Reason{Code: r.GetCode(), Message: r.GetMessage()})
	}
	return out
}

func when(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// StepBeginner begins a step of a run: the runs service (internal/runs)
// attaches one to the Manager's RunHost, and Begin hands it every request
// with a RunID.
type StepBeginner interface {
	// BeginStep checks the run's order, handoffs and artifacts, begins the
	// step's session (RunHost.Begin) and binds it to the run.
	BeginStep(ctx context.Context, req BeginRequest) (*BeginResult, error)
	// RunNames is a run's deployment and workflow names, for the log
	// (empty when the run cannot be read).
	RunNames(ctx context.Context, runID string) (deployment, workflow string)
}

// RunHost is all the runs service (internal/runs) reaches of sessions: the
// store, the registered workflows and deployments, a Begin bound to a
// step of a run, a session's latest result, a re-read of a session
// against its baseline through the one judging path (proof.go), artifact
// reads, and signing into the ledger. It judges nothing itself. The
// Manager makes one (Manager.RunHost); runs live in internal/runs.
type RunHost struct {
	m     *Manager
	steps atomic.Pointer[stepBeginnerBox]
}

type stepBeginnerBox struct{ s StepBeginner }

// Attach makes s answer Begin with a RunID. The first attached stays:
// every runs service over one RunHost is equivalent (it keeps no state of
// its own; the runs are in the store).
func (h *RunHost) Attach(s StepBeginner) {
	h.steps.CompareAndSwap(nil, &stepBeginnerBox{s: s})
}

// stepBeginner is the attached StepBeginner, nil when none is.
func (h *RunHost) stepBeginner() StepBeginner {
	if b := h.steps.Load(); b != nil {
		return b.s
	}
	return nil
}

// errNoRuns answers a Begin with a RunID on a Manager whose RunHost has no
// runs service attached (internal/runs.New attaches one).
func errNoRuns() error {
	return &Error{Kind: Invalid, Path: "run_id", Message: "this daemon serves no runs"}
}

// Store is the session store, which holds the runs too.
func (h *RunHost) Store() store.Backend { return h.m.store }

// Logger is the Manager's logger.
func (h *RunHost) Logger() hclog.Logger { return h.m.logger }

// Workflow is the registered workflow name (nil when none is).
func (h *RunHost) Workflow(name string) *workflow.Workflow { return h.m.workflows[name] }

// Deployment is the YAML of the deployment registered under name.
func (h *RunHost) Deployment(name string) ([]byte, error) {
	return h.m.deployments().bytes(BeginRequest{DeploymentName: name})
}

// RunMins is the policy's run_min_tier and run_min_rung for a run of wf
// against the deployment whose YAML is raw.
func (h *RunHost) RunMins(raw []byte, wf *workflow.Workflow) (tier, rung int, err error) {
	dep, _, err := parseDeployment(raw)
	if err != nil {
		return 0, 0, err
	}
	p := policyOf(h.m.daemon, dep, wf)
	return p.RunMinTier, p.RunMinRung, nil
}

// KeyedDigest is the keyed digest of data (Manager.KeyedDigest).
func (h *RunHost) KeyedDigest(data []byte) string { return h.m.KeyedDigest(data) }

// CheckParams bounds the parameters of a Begin or a BeginRun.
func (h *RunHost) CheckParams(params map[string]string) error { return checkParams(params) }

// Lock waits for the lock of key, which Verify's session locks share (a
// run's key is "run/" and its id); a wait ctx ends returns ctx's error.
func (h *RunHost) Lock(ctx context.Context, key string) (unlock func(), err error) {
	return h.m.locks.lock(ctx, key)
}

// Begin admits and begins a session of a step of a run (req names the
// run's workflow, deployment and step, with the step's parameters), which
// records binding in its metadata and verdict receipt. A refusal is
// returned as it is, unrecorded: the caller records it (RefuseBegin).
func (h *RunHost) Begin(ctx context.Context, req BeginRequest, binding *receipt.RunBinding) (*BeginResult, error) {
	req.run = binding
	a, err := h.m.deployments().admit(req)
	if err != nil {
		return nil, err
	}
	return h.m.begin(ctx, req, a)
}

// RefuseBegin records a refused Begin in the ledger, with the digest of
// the deployment YAML when given, as Begin records its own refusals, and
// returns err.
func (h *RunHost) RefuseBegin(ctx context.Context, req BeginRequest, deployment []byte, err error) error {
	return h.m.recordBeginRefusal(ctx, req, deployment, err)
}

// RefusalOutcome is the terminal outcome a Begin refusal records
// (REJECTED_POLICY, FAILED_PLATFORM or HALTED_BEFORE_EFFECT).
func RefusalOutcome(e *Error) string { return refusalOutcome(e) }

// ReasonPolicy is the Error.Reason of a refusal by the operator's policy
// (RefusalOutcome: REJECTED_POLICY).
const ReasonPolicy = reasonPolicy

// LatestResult is a session's latest result (the last re-verification, or
// the first result); nil while not verified. found is false for a session
// the store no longer has.
func (h *RunHost) LatestResult(ctx context.Context, id string) (res *Result, found bool, err error) {
	_, first, err := h.m.store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil || first == nil {
		return nil, err == nil, err
	}
	raw := first
	more, err := h.m.store.Reverifications(ctx, id)
	if err != nil {
		return nil, true, err
	}
	if len(more) > 0 {
		raw = more[len(more)-1]
	}
	var r Result
	if err := decodeResult(raw, &r); err != nil {
		return nil, true, err
	}
	return &r, true, nil
}

// ReleaseWriteSets releases the write set's holds of sessions (a run
// sealed VERIFIED: nothing reads them again as part of the run).
func (h *RunHost) ReleaseWriteSets(sessions []string) {
	for _, sid := range sessions {
		h.m.releaseWriteSets(context.Background(), sid)
	}
}

// VerifyArtifact is Manager.VerifyArtifact.
func (h *RunHost) VerifyArtifact(ctx context.Context, deploymentName string, a receipt.Artifact) (*ArtifactResult, error) {
	return h.m.VerifyArtifact(ctx, deploymentName, a)
}

// Documents reads every document the registered deployment name's
// document-hash or file candidate sees; absenceNotProof is its adapter's
// word that a document it does not list may still exist.
func (h *RunHost) Documents(ctx context.Context, name string) (s judge.Snapshot, absenceNotProof bool, err error) {
	return h.m.artifacts().documents(ctx, name)
}

// SignRun signs a run receipt (receipt.PayloadTypeRun) of run id into
// ledger l: payload builds it at the ledger position taken now, with the
// signer's reference. Without a signing key it appends nothing and
// returns no envelope.
func (h *RunHost) SignRun(l store.Ledger, id string, payload func(pos receipt.Position, signer receipt.Signer) any) (json.RawMessage, error) {
	return newReceiptSigner(h.m.signer).sign(l, receipt.PayloadTypeRun, id, payload)
}

package client

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// Request is what a session is begun for: a deployment (by name, or
// inline), the step's contracts (a registered workflow step, or effects
// the caller sends) and the run parameters bound into them.
type Request struct {
	// Deployment names a deployment in the daemon's configuration.
	Deployment string
	// DeploymentYAML is an inline deployment, instead of Deployment
	// (refused unless the daemon runs with --allow-inline-deployments).
	DeploymentYAML []byte
	// Workflow and Step name a registered workflow step: the contracts
	// come from the operator's reviewed file.
	Workflow string
	Step     string
	// Effects are the step's contracts, a YAML or JSON list, instead of a
	// registered step (refused unless the operator sets
	// policy.require_registered_contracts: false).
	Effects []byte
	// Params are the run parameters, as the text the daemon binds.
	Params map[string]string
}

func (r Request) proto() (*verifierv1.BeginRequest, error) {
	pb := &verifierv1.BeginRequest{Effects: string(r.Effects), Params: verifierv1.StringParams(r.Params), Workflow: r.Workflow, Step: r.Step}
	switch {
	case r.Deployment != "" && len(r.DeploymentYAML) > 0:
		return nil, errors.New("client.Request: Deployment and DeploymentYAML are both set; give one")
	case r.Deployment != "":
		pb.Deployment = &verifierv1.BeginRequest_DeploymentName{DeploymentName: r.Deployment}
	case len(r.DeploymentYAML) > 0:
		pb.Deployment = &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: string(r.DeploymentYAML)}
	default:
		return nil, errors.New("client.Request: no deployment; set Deployment to a deployment name of the daemon's configuration")
	}
	if (r.Workflow == "") != (r.Step == "") {
		return nil, errors.New("client.Request: Workflow and Step name a registered step together; set both, or neither and send Effects")
	}
	return pb, nil
}

// Session is what Begin answered.
type Session struct {
	ID string
	// Effects says, per contract in order, which candidate was pinned.
	Effects []BegunEffect
	// RegisteredStep is the workflow step whose contracts the session
	// judges; nil when the caller sent the effects.
	RegisteredStep *RegisteredStep
	// UnusedParams are run parameters that nothing of the step references,
	// most often a misspelt name; the session was begun all the same.
	UnusedParams []string
	// Deployment is the deployment name the session was begun with (empty
	// for an inline deployment).
	Deployment string
}

// Expect is what the session's receipts must be about: its id, and the
// deployment name and registered step it was begun with, when there are.
func (s *Session) Expect() receipt.Expect {
	e := receipt.Expect{Session: s.ID, Deployment: s.Deployment}
	if s.RegisteredStep != nil {
		e.Step = s.RegisteredStep.Step
	}
	return e
}

// BegunEffect is the candidate pinned for one effect.
type BegunEffect struct {
	ContractHash   string
	Tier           int
	Candidate      string // "kind" or "kind/name"
	CandidateIndex int
}

// RegisteredStep names the reviewed source of a session's contracts.
type RegisteredStep struct {
	Workflow       string
	WorkflowDigest string
	Step           string
}

func registeredOf(r *verifierv1.RegisteredStep) *RegisteredStep {
	if r == nil {
		return nil
	}
	return &RegisteredStep{Workflow: r.GetWorkflow(), WorkflowDigest: r.GetWorkflowDigest(), Step: r.GetStep()}
}

func sessionOf(res *verifierv1.BeginResponse, req Request) *Session {
	s := &Session{ID: res.GetSessionId(), RegisteredStep: registeredOf(res.GetRegisteredStep()),
		UnusedParams: res.GetUnusedParams(), Deployment: req.Deployment}
	for _, e := range res.GetEffects() {
		s.Effects = append(s.Effects, BegunEffect{ContractHash: e.GetContractHash(), Tier: int(e.GetTier()),
			Candidate: e.GetCandidate(), CandidateIndex: int(e.GetCandidateIndex())})
	}
	return s
}

// Outcome is a step's outcome.
type Outcome string

// Outcomes. Only Verified lets an automation go on.
const (
	Verified               Outcome = "VERIFIED"
	ReconciliationRequired Outcome = "RECONCILIATION_REQUIRED"
	HaltedBeforeEffect     Outcome = "HALTED_BEFORE_EFFECT"
	// RejectedPolicy and FailedPlatform are terminal outcomes only (the
	// ledger's and the receipt's), never a judged outcome.
	RejectedPolicy Outcome = "REJECTED_POLICY"
	FailedPlatform Outcome = "FAILED_PLATFORM"
)

// Result is a verified session's result.
type Result struct {
	SessionID string
	Outcome   Outcome
	// TerminalOutcome is the outcome the ledger and the receipt record:
	// Outcome, or FailedPlatform when a non-confirmed verdict comes from an
	// adapter process that failed.
	TerminalOutcome Outcome
	Effects         []Effect
	RegisteredStep  *RegisteredStep
	// Receipt is the signed receipt of this result: a DSSE envelope, JSON.
	Receipt []byte
}

// Tasks are the reconciliation tasks of the result's effects, in order.
func (r *Result) Tasks() []*Task {
	var out []*Task
	for i := range r.Effects {
		if t := r.Effects[i].Task; t != nil {
			out = append(out, t)
		}
	}
	return out
}

// CheckReceipt checks that the result's receipt is signed by pub and is
// about want (see receipt.CheckSubject), and returns its signed payload.
func (r *Result) CheckReceipt(pub ed25519.PublicKey, want receipt.Expect) ([]byte, error) {
	if len(r.Receipt) == 0 {
		return nil, errors.New("the result carries no receipt")
	}
	env, err := receipt.ParseEnvelope(r.Receipt)
	if err != nil {
		return nil, err
	}
	return env.OpenExpecting(pub, want)
}

// Effect is the verdict on one effect, with its evidence (already
// redacted by the daemon).
type Effect struct {
	Verdict       string // CONFIRMED, REFUTED, INDETERMINATE
	Class         string // confirmed, stale, unavailable, indeterminate, conflicting, refuted
	Reasons       []Reason
	ObservedCount *int64
	ExpectedCount *int64
	ObservedValue *string
	ExpectedValue *string
	// MatchedRecords are the matched records, one JSON object each.
	MatchedRecords []json.RawMessage
	ContractHash   string
	Tier           int
	// OracleRung is the read's rung of the oracle ladder: 0 a screen, 1 a
	// separate session of the application, 2 the system of record, 3 a
	// counterparty (docs/receipts.md); 0 from Judge.
	OracleRung int
	Substrate  string
	// Newness is how the read proved a record new: "census",
	// "whole_read" (proven by the daemon), "whole_read_declared" (the
	// operator's declaration) or "newly_matching"; CensusScope, with a
	// census, "proven" or "declared".
	Newness     string
	CensusScope string
	// CollateralScope is what the loss checks could see: "collection" or
	// "subject".
	CollateralScope string
	// Task is set when the verdict needs a person.
	Task *Task
}

// Reason explains a verdict.
type Reason struct {
	Code    string
	Message string
}

// Task asks a person to repair state. It carries no field or selector
// values.
type Task struct {
	ID           string
	Kind         string // effect_refuted, effect_indeterminate, compensation_failed
	Substrate    string
	EffectKind   string
	ContractHash string
	Verdict      string
	ReasonCodes  []string
	// SuggestedAction is RESTORE_ACCESS, REMOVE_DUPLICATES, MANUAL_REPAIR
	// or REVERIFY_BEFORE_RETRY.
	SuggestedAction string
	ObservedCount   *int64
	ExpectedCount   *int64
	ValuesMatch     *bool
	RecordDigests   []string
}

// enum drops a generated enum name's prefix (OUTCOME_VERIFIED: VERIFIED).
func enum(name, prefix string) string {
	if strings.HasSuffix(name, "_UNSPECIFIED") {
		return ""
	}
	return strings.TrimPrefix(name, prefix)
}

func resultOf(res *verifierv1.VerifyResponse) *Result {
	r := &Result{SessionID: res.GetSessionId(), Outcome: Outcome(enum(res.GetOutcome().String(), "OUTCOME_")),
		TerminalOutcome: Outcome(enum(res.GetTerminalOutcome().String(), "OUTCOME_")),
		RegisteredStep:  registeredOf(res.GetRegisteredStep())}
	if env := res.GetReceipt(); env != nil {
		r.Receipt = verifierv1.EnvelopeJSON(env)
	}
	for _, e := range res.GetEffects() {
		r.Effects = append(r.Effects, effectOf(e))
	}
	return r
}

func effectOf(e *verifierv1.EffectResult) Effect {
	out := Effect{Verdict: enum(e.GetVerdict().String(), "VERDICT_"),
		Class:         strings.ToLower(enum(e.GetResult().String(), "RESULT_CLASS_")),
		ObservedCount: count(e.ObservedCount), ExpectedCount: count(e.ExpectedCount),
		ObservedValue: e.ObservedValue, ExpectedValue: e.ExpectedValue,
		ContractHash: e.GetContractHash(), Tier: int(e.GetTier()), OracleRung: int(e.GetOracleRung()), Substrate: e.GetSubstrate(),
		Newness: e.GetNewness(), CensusScope: e.GetCensusScope(), CollateralScope: e.GetCollateralScope()}
	for _, r := range e.GetReasons() {
		out.Reasons = append(out.Reasons, Reason{Code: r.GetCode(), Message: r.GetMessage()})
	}
	for _, m := range e.GetMatchedRecords() {
		if b, err := protojson.Marshal(m); err == nil {
			out.MatchedRecords = append(out.MatchedRecords, json.RawMessage(b))
		}
	}
	if t := e.GetReconciliationTask(); t != nil {
		ev := t.GetEvidence()
		out.Task = &Task{ID: t.GetId(), Kind: enum(t.GetKind().String(), "RECONCILIATION_KIND_"),
			Substrate: t.GetSubstrate(), EffectKind: t.GetEffectKind(), ContractHash: t.GetContractHash(),
			Verdict: enum(t.GetVerdict().String(), "VERDICT_"), ReasonCodes: t.GetReasonCodes(),
			SuggestedAction: enum(t.GetSuggestedAction().String(), "SUGGESTED_ACTION_"),
			ObservedCount:   count(ev.ObservedCount), ExpectedCount: count(ev.ExpectedCount), ValuesMatch: ev.ValuesMatch,
			RecordDigests: ev.GetRecordDigests()}
	}
	return out
}

// count widens a count of the wire to the client's.
func count(n *int32) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

// String is the outcome and the session, for logs.
func (r *Result) String() string {
	return fmt.Sprintf("%s (session %s)", r.Outcome, r.SessionID)
}

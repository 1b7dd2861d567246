package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// RegisteredStep names the reviewed source of a session's contracts.
type RegisteredStep struct {
	Workflow       string `json:"workflow"`
	WorkflowDigest string `json:"workflow_digest"`
	Step           string `json:"step"`
}

// LoadWorkflows loads every workflow file the daemon config registers. A
// file that does not load stops the daemon from starting, naming the file
// and the path in it.
func LoadWorkflows(d *config.Daemon) (map[string]*workflow.Workflow, error) {
	out := map[string]*workflow.Workflow{}
	if d == nil {
		return out, nil
	}
	names := slices.Sorted(maps.Keys(d.Workflows))
	for _, name := range names {
		w, err := workflow.Load(d.Workflows[name])
		if err != nil {
			return nil, fmt.Errorf("workflows.%s: %w", name, err)
		}
		out[name] = w
	}
	return out, nil
}

// Rule codes of the trust refusals (PermissionDenied). The contract guards'
// codes are workflow.Code*.
const (
	// CodeInlineDeploymentRefused: the caller sent a deployment instead of
	// naming a registered one, and the daemon does not allow that.
	CodeInlineDeploymentRefused = "inline_deployment_refused"
	// CodeInlineSecretRefused: an inline deployment named a secret.
	CodeInlineSecretRefused = "inline_secret_refused"
	// CodeInlineCompensatorRefused: an inline deployment configured a
	// compensator.
	CodeInlineCompensatorRefused = "inline_compensator_refused"
	// CodeInlinePolicyRefused: an inline deployment carried a policy block;
	// the caller may not set policy.
	CodeInlinePolicyRefused = "inline_policy_refused"
	// CodeRegisteredContractsRequired: the caller sent effects while the
	// policy requires a registered workflow step.
	CodeRegisteredContractsRequired = "registered_contracts_required"
)

// admitted is a Begin request the trust checks let through: its deployment
// and contracts, where the contracts come from, and the effective policy.
type admitted struct {
	deployment []byte
	effects    []byte
	registered *RegisteredStep
	policy     workflow.Effective
	// registeredIrreversible: the registered step is marked risk:
	// irreversible (an effect's own risk says the same for its step).
	registeredIrreversible bool
}

// admit applies the trust rules to a Begin before anything is configured
// or read: named deployments only (unless the development switch is on,
// and then no secret, compensator or policy inline), the contracts of a
// registered step or, unless the policy requires those, the caller's, and
// the contract guards. The tier guard needs the selected candidates and
// comes later (checkTiers).
func (d deployments) admit(req BeginRequest) (*admitted, error) {
	if err := checkParams(req.Params); err != nil {
		return nil, err
	}
	deployment, inline, err := d.source(req, "Begin")
	if err != nil {
		return nil, err
	}
	effects, registered, wf, err := d.contractSource(req)
	if err != nil {
		return nil, err
	}
	dep, _, err := parseDeployment(deployment)
	if err != nil {
		return nil, err
	}
	if inline {
		if err := checkInline(dep); err != nil {
			return nil, err
		}
	}
	var step *workflow.Step
	if wf != nil {
		step, _ = wf.Step(req.Step)
	}
	pol := d.policy(dep, wf).ForStep(step)
	if registered == nil && pol.RequireRegisteredContracts {
		return nil, &Error{Kind: Denied, Code: CodeRegisteredContractsRequired, Path: "effects",
			Message: "the daemon's policy requires registered contracts (require_registered_contracts, on unless the operator turns it off); name a registered workflow and step (--workflow NAME --step NAME) instead of sending effects, or, for contracts the caller may choose, set policy.require_registered_contracts: false in the daemon config or the registered deployment"}
	}
	if err := checkContracts(pol, effects, req.Params, wf); err != nil {
		return nil, err
	}
	return &admitted{deployment: deployment, effects: effects, registered: registered, policy: pol,
		registeredIrreversible: step != nil && step.Risk == workflow.RiskIrreversible}, nil
}

// source resolves the deployment bytes, and whether they came inline, and
// refuses an inline deployment unless the daemon runs with the
// development switch.
func (d deployments) source(req BeginRequest, call string) ([]byte, bool, error) {
	data, err := d.bytes(req)
	if err != nil {
		return nil, false, err
	}
	if req.DeploymentName != "" {
		return data, false, nil
	}
	if !d.allowInline {
		return nil, false, &Error{Kind: Denied, Code: CodeInlineDeploymentRefused, Path: "deployment",
			Message: "the daemon reads only deployments registered in its config (deployments:); name one with --deployment-name NAME (deployment_name), or, for development only, start the daemon with --allow-inline-deployments"}
	}
	d.logger.Warn("inline deployment accepted (--allow-inline-deployments is a development switch: the caller chooses where the daemon reads)", "call", call)
	return data, true, nil
}

// contractSource resolves the contracts: the caller's effects, or a
// registered workflow step's.
func (d deployments) contractSource(req BeginRequest) ([]byte, *RegisteredStep, *workflow.Workflow, error) {
	if req.Workflow == "" && req.Step == "" {
		return req.Effects, nil, nil, nil
	}
	if len(req.Effects) > 0 {
		return nil, nil, nil, &Error{Kind: Invalid, Path: "effects", Message: "give effects or a registered workflow and step, not both"}
	}
	if req.Workflow == "" || req.Step == "" {
		return nil, nil, nil, &Error{Kind: Invalid, Path: "workflow", Message: "give both workflow and step"}
	}
	w := d.workflows[req.Workflow]
	if w == nil {
		return nil, nil, nil, &Error{Kind: Invalid, Path: "workflow", Message: fmt.Sprintf("no workflow named %q in the daemon config (workflows:)", req.Workflow)}
	}
	st, ok := w.Step(req.Step)
	if !ok {
		return nil, nil, nil, &Error{Kind: Invalid, Path: "step", Message: fmt.Sprintf("workflow %q has no step %q", req.Workflow, req.Step)}
	}
	if len(st.EffectsTree) == 0 {
		return nil, nil, nil, &Error{Kind: Refused, Code: workflow.CodeMissingEffectContract, Path: "step",
			Message: fmt.Sprintf("step %q of workflow %q declares no effects; a step with no contract proves nothing", req.Step, req.Workflow)}
	}
	effects, err := json.Marshal(st.EffectsTree)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encoding the effects of step %q: %w", req.Step, err)
	}
	return effects, &RegisteredStep{Workflow: req.Workflow, WorkflowDigest: w.Digest, Step: req.Step}, w, nil
}

// checkInline refuses what an inline deployment may never carry: a
// secret, a compensator or a policy.
func checkInline(dep *config.Deployment) error {
	if dep.Policy != nil {
		return &Error{Kind: Denied, Code: CodeInlinePolicyRefused, Path: "deployment.policy",
			Message: "an inline deployment may not set policy; the operator sets it in the daemon config or a registered deployment"}
	}
	for i, c := range dep.Candidates {
		path := fmt.Sprintf("deployment.effects.candidates[%d]", i)
		if len(dep.Candidates) == 1 {
			path = "deployment.effects"
		}
		if len(c.Secrets) > 0 {
			slots := slices.Sorted(maps.Keys(c.Secrets))
			return &Error{Kind: Denied, Code: CodeInlineSecretRefused, Path: path + "." + slots[0],
				Message: "an inline deployment may reference no secret; register the deployment in the daemon config (deployments:) and name it with --deployment-name"}
		}
		if c.Compensator != nil {
			return &Error{Kind: Denied, Code: CodeInlineCompensatorRefused, Path: path + ".compensator",
				Message: "an inline deployment may configure no compensator; register the deployment in the daemon config (deployments:) and name it with --deployment-name"}
		}
	}
	return nil
}

// policy resolves the effective contract guards: daemon, then the
// registered deployment, then the workflow (min_settle_s: the largest).
func (d deployments) policy(dep *config.Deployment, wf *workflow.Workflow) workflow.Effective {
	return policyOf(d.daemon, dep, wf)
}

// policyOf is the policy in force for dep (and wf, when not nil) under
// daemon's (which may be nil).
func policyOf(daemon *config.Daemon, dep *config.Deployment, wf *workflow.Workflow) workflow.Effective {
	var layers []*workflow.Policy
	if daemon != nil {
		layers = append(layers, daemon.Policy)
	}
	layers = append(layers, dep.Policy)
	if wf != nil {
		layers = append(layers, wf.Policy)
	}
	return workflow.Resolve(layers...)
}

// checkContracts applies the contract guards before anything is read.
func checkContracts(p workflow.Effective, effects []byte, params map[string]string, wf *workflow.Workflow) error {
	list, err := effectsList(effects)
	if err != nil {
		return err
	}
	// Malformed input is reported before any policy rule: a contract whose
	// {param} the run does not supply is InvalidArgument, not a guard.
	for i, e := range list {
		if _, err := judge.Bind(e, params, fmt.Sprintf("effects[%d]", i)); err != nil {
			return judgeError(err)
		}
	}
	secret := map[string]bool{}
	if wf != nil {
		secret = wf.SecretParams()
	}
	if fs := workflow.CheckContracts(p, list, secret, "effects"); len(fs) > 0 {
		return findingError(fs[0])
	}
	return nil
}

// effectsList takes a parsed effects list from the cache or parses it
// within the limits; the caller (parse) caches it once the step is accepted.
func effectsList(effects []byte) ([]judge.Effect, error) {
	if list, ok := parsedEffects.get(docKey(effects)); ok {
		return list, nil
	}
	return parseEffectsDoc(effects)
}

func findingError(f workflow.Finding) error {
	return &Error{Kind: Refused, Reason: reasonPolicy, Code: f.Code, Path: f.Path, Message: f.Code + ": " + f.Message}
}

// checkTiers applies min_tier to the selected candidates, before capture.
func checkTiers(p workflow.Effective, res *BeginResult) error {
	for i, e := range res.Effects {
		if fs := workflow.CheckTier(p, e.Tier, e.Candidate, i, fmt.Sprintf("effects[%d]", i)); len(fs) > 0 {
			return findingError(fs[0])
		}
	}
	return nil
}

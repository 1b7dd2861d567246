package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/judge"
)

// CandidateCheck is the preflight answer for one candidate.
type CandidateCheck struct {
	CandidateIndex int      `json:"candidate_index"`
	Kind           string   `json:"kind"`
	Tier           int      `json:"tier"`
	Reachable      bool     `json:"reachable"`
	Message        string   `json:"message"`
	Warnings       []string `json:"warnings"`
	LatencyMS      float64  `json:"latency_ms"`
	// Newness is how the candidate proves a record new (census,
	// whole_read, newly_matching); NewnessDeclared says a census or a
	// newness: declaration proves it, not the shape of the read; Narrowing
	// is what narrows the read (config.Candidate.Narrowing). verifyctl
	// lint applies require_proven_newness with them.
	Newness         string   `json:"newness"`
	NewnessDeclared bool     `json:"newness_declared"`
	Narrowing       []string `json:"narrowing"`
	// NewnessRefusal, when set, says (naming require_proven_newness) that
	// Begin would refuse every change claim of the registered workflow
	// steps read through this candidate (newnessGuard.refusal).
	NewnessRefusal string `json:"newness_refusal,omitempty"`
}

// TestConnection configures every candidate of a deployment and runs its
// adapter's read-only preflight. A candidate that cannot be configured is
// reported unreachable with the reason; only a malformed deployment is an
// error.
func (m *Manager) TestConnection(ctx context.Context, deployment []byte, deploymentName string, params map[string]string) ([]CandidateCheck, error) {
	p := newPreflight(m.deployments(), m.configurer(), m.lookupEnv)
	p.newness = newnessGuard{policy: p.deployments.policy, workflows: m.workflows}
	return p.test(ctx, deployment, deploymentName, params)
}

// preflight runs TestConnection: it resolves the deployment under the
// trust rule (deployments), configures its candidates and their censuses
// (configurer) and masks the secrets lookupEnv resolves.
type preflight struct {
	deployments deployments
	configurer  *configurer
	lookupEnv   func(string) (string, bool)
	newness     newnessGuard
}

// newPreflight is the preflight over its parts.
func newPreflight(d deployments, c *configurer, lookupEnv func(string) (string, bool)) preflight {
	return preflight{deployments: d, configurer: c, lookupEnv: lookupEnv}
}

// test is TestConnection.
func (p preflight) test(ctx context.Context, deployment []byte, deploymentName string, params map[string]string) ([]CandidateCheck, error) {
	data, inline, err := p.deployments.source(BeginRequest{Deployment: deployment, DeploymentName: deploymentName}, "TestConnection")
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]string{}
	}
	// Preflight needs no contracts; a 5 s window bounds the adapters'.
	dep, _, err := parse(data, []byte(`[{"kind": "record_written"}]`), params)
	if err != nil {
		return nil, err
	}
	if inline {
		if err := checkInline(dep); err != nil {
			return nil, err
		}
	}
	probe := []*judge.Contract{{TimeoutS: judge.DefaultTimeoutS}}
	insts, errs := p.configurer.configure(ctx, dep, probe, params, false)
	out := make([]CandidateCheck, len(dep.Candidates))
	for i, c := range dep.Candidates {
		out[i] = CandidateCheck{CandidateIndex: i, Kind: c.Kind, Warnings: []string{},
			Newness: c.NewnessOf(), NewnessDeclared: c.Census != nil || c.DeclaredNewness() != "", Narrowing: c.Narrowing(),
			NewnessRefusal: p.newness.refusal(dep, i)}
		for _, n := range dep.Notices {
			if n.Candidate == i {
				out[i].Warnings = append(out[i].Warnings, n.Path+": "+n.Message)
			}
		}
		if out[i].Narrowing == nil {
			out[i].Narrowing = []string{}
		}
		if errs[i] != nil {
			out[i].Message = errs[i].Error()
			continue
		}
		out[i].Tier = int(insts[i].Info().Tier)
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := insts[i].TestConnection(tctx)
		cancel()
		if err != nil {
			out[i].Message = fmt.Sprintf("preflight failed: %v", err)
			if errors.Is(err, pluginhost.ErrPluginShutdown) {
				out[i].Message = "the adapter process stopped during the preflight: " + err.Error()
			}
			continue
		}
		out[i].Reachable, out[i].Message = r.Reachable, r.Message
		out[i].Warnings = append(out[i].Warnings, r.Warnings...)
		out[i].LatencyMS = float64(r.Latency.Microseconds()) / 1000
		if out[i].Reachable && c.Census != nil {
			// A census that cannot be read refuses every Begin through
			// this candidate: the candidate is not usable.
			if msg := p.testCensus(ctx, dep, i, probe); msg != "" {
				out[i].Reachable, out[i].Message = false, msg
			}
		}
		if out[i].Reachable && c.Changes != nil {
			// Nor is one whose write set cannot be read.
			if msg := p.testWriteSet(ctx, deploymentName, dep, i); msg != "" {
				out[i].Reachable, out[i].Message = false, msg
			}
		}
	}
	// An adapter's message may quote the server's answer, and a server may
	// quote the credential it refused: none of the candidate's secrets
	// leaves in it.
	for i := range out {
		secrets := maskSecrets(p.lookupEnv, &dep.Candidates[i])
		out[i].Message = secrets.text(out[i].Message)
		for k, w := range out[i].Warnings {
			out[i].Warnings[k] = secrets.text(w)
		}
	}
	return out, nil
}

// JudgeRequest is the pure judge over client-supplied reads.
type JudgeRequest struct {
	Effects []byte
	Params  map[string]string
	Before  judge.Snapshot
	After   judge.Snapshot
	// BeforeBatch and AfterBatch, when set, are the reads in compact form
	// (the fast decoder's) and are judged instead of Before and After.
	BeforeBatch *judge.BatchSnapshot
	AfterBatch  *judge.BatchSnapshot
	Now         time.Time
	Freshness   *judge.Freshness
}

// Judge judges client-supplied reads with exactly the daemon's judge: the
// one judging path (prove), with no deployment's options.
func Judge(req JudgeRequest) (*Result, error) {
	if err := checkParams(req.Params); err != nil {
		return nil, err
	}
	list, err := parseEffectsDoc(req.Effects)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, &Error{Kind: Invalid, Code: judge.CodeInvalidContract, Path: "effects", Message: "no effects declared"}
	}
	params := req.Params
	if params == nil {
		params = map[string]string{}
	}
	// A client's reads belong to no deployment: no census; the freshness
	// window is the request's.
	opts := proofOptions(nil, false, nil, req.Now)
	if req.Freshness != nil {
		f := *req.Freshness
		f.Now = req.Now
		opts.Freshness = &f
	}
	res := &Result{Effects: make([]EffectResult, len(list))}
	contracts := make([]*judge.Contract, len(list))
	for i, e := range list {
		c, err := judge.Bind(e, params, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			return nil, judgeError(err)
		}
		contracts[i] = c
	}
	irreversible := irreversibleStep(contracts)
	tasks := make([]*judge.Task, len(list))
	reads := proofReads{before: req.Before, after: req.After, beforeBatch: req.BeforeBatch, afterBatch: req.AfterBatch}
	verdicts := prove(nil, contracts, reads, opts).Verdicts
	for i, c := range contracts {
		v := verdicts[i]
		res.Effects[i] = EffectResult{
			EffectResult: judge.EffectResult{
				Verdict: v.Decision, Result: v.Class, Reasons: v.Reasons,
				ObservedCount: v.ObservedCount, ExpectedCount: v.ExpectedCount,
				ObservedValue: v.ObservedValue, ExpectedValue: v.ExpectedValue,
				ContractHash: c.Hash, MatchedRecords: v.Matched,
			},
			// Unkeyed digests: the client sent these records, and a keyed
			// digest would make the daemon an oracle for its task digests.
			ReconciliationTask: judge.NewTask("judge", i, "client", c, &v, judge.TaskOptions{IrreversibleStep: irreversible}),
		}
		tasks[i] = res.Effects[i].ReconciliationTask
	}
	res.Outcome = judge.OutcomeOf(verdicts)
	judge.SuggestForOutcome(res.Outcome, tasks)
	return res, nil
}

// testCensus runs the read-only preflight of candidate i's census; "" when
// it answered.
func (p preflight) testCensus(ctx context.Context, dep *config.Deployment, i int, contracts []*judge.Contract) string {
	inst, err := p.configurer.census(ctx, dep, i, contracts)
	if err != nil {
		return "census: " + err.Error()
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := inst.TestConnection(tctx)
	switch {
	case err != nil:
		return fmt.Sprintf("census: preflight failed: %v", err)
	case !r.Reachable:
		return "census: " + r.Message
	}
	return ""
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// exitNotVerified is `run finish` and `run rollback-check` answering
// anything but what the command asked for: a run that is not VERIFIED, or
// one whose changes are not all gone. The JSON on stdout says why.
const exitNotVerified = 4

const runUsage = `usage: verifyctl run begin --workflow NAME --deployment-name NAME [--param k=v] [--run-id ID]
       verifyctl run finish --run RUN [--receipt-out FILE]
       verifyctl run show --run RUN
       verifyctl run rollback-check --run RUN [--receipt-out FILE]`

// cmdRun: the run commands. A run is one workflow against one deployment;
// its steps are begun with `begin --run RUN --step S`.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, runUsage)
		return exitInvalid
	}
	switch args[0] {
	case "begin":
		return cmdRunBegin(args[1:], stdout, stderr)
	case "finish":
		return cmdRunFinish(args[1:], stdout, stderr)
	case "show":
		return cmdRunShow(args[1:], stdout, stderr)
	case "rollback-check":
		return cmdRunRollbackCheck(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "verifyctl: unknown run command %q\n%s\n", args[0], runUsage)
	return exitInvalid
}

func cmdRunBegin(args []string, stdout, stderr io.Writer) int {
	ps := params{}
	req := &verifierv1.BeginRunRequest{}
	return clientCommand("run begin", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&req.Workflow, "workflow", "", "name of a workflow in the daemon config")
		fs.StringVar(&req.DeploymentName, "deployment-name", "", "name of a deployment in the daemon config")
		fs.StringVar(&req.RunId, "run-id", "", "optional run id of your choosing (1-128 of A-Z a-z 0-9 . _ -): the same id with the same arguments returns the same run")
		fs.Var(ps, "param", "run parameter name=value, bound into every step (repeatable)")
		return func() error {
			if req.Workflow == "" || req.DeploymentName == "" {
				return fmt.Errorf("needs --workflow NAME and --deployment-name NAME")
			}
			req.Params = verifierv1.StringParams(ps)
			return nil
		}
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.BeginRun(ctx, req)
		if err != nil {
			return nil, err
		}
		return map[string]any{"run_id": res.GetRunId()}, nil
	})
}

// runFlag registers --run and checks it was given.
func runFlag(id *string) func(fs *flag.FlagSet) func() error {
	return func(fs *flag.FlagSet) func() error {
		fs.StringVar(id, "run", "", "run id from run begin")
		return func() error {
			if *id == "" {
				return fmt.Errorf("needs --run RUN")
			}
			return nil
		}
	}
}

// cmdRunFinish classifies and seals the run. It prints the run whatever
// its outcome, and exits 0 only for VERIFIED.
func cmdRunFinish(args []string, stdout, stderr io.Writer) int {
	var id, receiptOut string
	verified := false
	code := clientCommand("run finish", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&receiptOut, "receipt-out", "", "also write the signed run receipt (DSSE envelope JSON) alone to this file")
		return runFlag(&id)(fs)
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.FinishRun(ctx, &verifierv1.FinishRunRequest{RunId: id})
		if err != nil {
			return nil, err
		}
		if err := saveReceipt(receiptOut, res.GetReceipt()); err != nil {
			return nil, err
		}
		verified = res.GetRun().GetOutcome() == verifierv1.Outcome_VERIFIED
		out := runJSON(res.GetRun())
		out["receipt"] = receiptJSON(res.GetReceipt())
		return out, nil
	})
	if code == exitOK && !verified {
		return exitNotVerified
	}
	return code
}

func cmdRunShow(args []string, stdout, stderr io.Writer) int {
	var id string
	return clientCommand("run show", args, stdout, stderr, runFlag(&id), func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.GetRun(ctx, &verifierv1.GetRunRequest{RunId: id})
		if err != nil {
			return nil, err
		}
		out := runJSON(res.GetRun())
		out["receipt"] = receiptJSON(res.GetReceipt())
		return out, nil
	})
}

// cmdRunRollbackCheck re-reads every begun step against its baseline. It
// exits 0 only when every change the run made is gone (the run is then
// sealed ROLLED_BACK_VERIFIED); otherwise it prints what remains and exits
// 4, and the run is unchanged.
func cmdRunRollbackCheck(args []string, stdout, stderr io.Writer) int {
	var id, receiptOut string
	rolledBack := false
	code := clientCommand("run rollback-check", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&receiptOut, "receipt-out", "", "when the run is sealed ROLLED_BACK_VERIFIED, also write its receipt alone to this file")
		return runFlag(&id)(fs)
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.RollbackCheck(ctx, &verifierv1.RollbackCheckRequest{RunId: id})
		if err != nil {
			return nil, err
		}
		rolledBack = res.GetRolledBack()
		if rolledBack {
			if err := saveReceipt(receiptOut, res.GetReceipt()); err != nil {
				return nil, err
			}
		}
		remains := []map[string]any{}
		for _, r := range res.GetRemains() {
			remains = append(remains, map[string]any{
				"step": r.GetStep(), "session_id": r.GetSessionId(), "effect_index": r.GetEffectIndex(),
				"contract_hash": r.GetContractHash(), "reasons": reasonsJSON(r.GetReasons()),
			})
		}
		out := runJSON(res.GetRun())
		out["rolled_back"] = rolledBack
		out["remains"] = remains
		out["receipt"] = receiptJSON(res.GetReceipt())
		return out, nil
	})
	if code == exitOK && !rolledBack {
		return exitNotVerified
	}
	return code
}

// runJSON renders a run: its outcome at the top (null while it was never
// sealed), one entry per step of the workflow and one per artifact, enum
// values as the API's JSON writes them.
func runJSON(r *verifierv1.Run) map[string]any {
	steps := []map[string]any{}
	for _, s := range r.GetSteps() {
		steps = append(steps, map[string]any{
			"step": s.GetStep(), "consequential": s.GetConsequential(),
			"session_id": nullable(s.GetSessionId()), "outcome": outcomeJSON(s.GetOutcome()),
			"tier": s.GetTier(), "oracle_rung": s.GetOracleRung(), "receipt_digest": nullable(s.GetReceiptDigest()),
		})
	}
	artifacts := []map[string]any{}
	for _, a := range r.GetArtifacts() {
		var verdict any
		if a.GetVerdict() != verifierv1.Verdict_VERDICT_UNSPECIFIED {
			verdict = a.GetVerdict().String()
		}
		artifacts = append(artifacts, map[string]any{
			"artifact": a.GetArtifact(), "from_step": a.GetFromStep(), "verdict": verdict,
			"sha256": nullable(a.GetSha256()), "size": a.GetSize(), "receipt_digest": nullable(a.GetReceiptDigest()),
		})
	}
	return map[string]any{
		"run_id": r.GetRunId(), "workflow": r.GetWorkflow(), "deployment_name": r.GetDeploymentName(),
		"state": r.GetState().String(), "outcome": outcomeJSON(r.GetOutcome()), "attempt": r.GetAttempt(),
		"tier": r.GetTier(), "oracle_rung": r.GetOracleRung(),
		"steps": steps, "artifacts": artifacts, "reasons": reasonsJSON(r.GetReasons()),
		"begun_at": timeJSON(r.GetBegunAt()), "sealed_at": timeJSON(r.GetSealedAt()),
	}
}

func outcomeJSON(o verifierv1.Outcome) any {
	if o == verifierv1.Outcome_OUTCOME_UNSPECIFIED {
		return nil
	}
	return o.String()
}

func reasonsJSON(rs []*verifierv1.Reason) []map[string]string {
	out := []map[string]string{}
	for _, r := range rs {
		out = append(out, map[string]string{"code": r.GetCode(), "message": r.GetMessage()})
	}
	return out
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timeJSON(t *timestamppb.Timestamp) any {
	if t == nil {
		return nil
	}
	return t.AsTime().Format(time.RFC3339Nano)
}

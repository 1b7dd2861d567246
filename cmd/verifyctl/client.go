package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// Exit codes of the client commands.
const (
	exitOK      = 0
	exitFailure = 1 // transport or daemon failure
	exitInvalid = 2 // invalid input
	exitRefused = 3 // the session was refused: do not actuate
)

// params collects repeated --param k=v flags.
type params map[string]string

func (p params) String() string { return fmt.Sprint(map[string]string(p)) }

func (p params) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("write --param name=value")
	}
	if _, dup := p[k]; dup {
		return fmt.Errorf("--param %s given twice", k)
	}
	p[k] = val
	return nil
}

// clientFlags are shared by the commands that talk to a daemon.
type clientFlags struct {
	addr     string
	tokenEnv string
	caFile   string
	insecure bool
	timeout  time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7443", "daemon address HOST:PORT")
	fs.StringVar(&c.tokenEnv, "token-env", "", "environment variable holding the API bearer token")
	fs.StringVar(&c.caFile, "tls-ca", "", "CA certificate (PEM) to verify the daemon's TLS; without it the connection is plaintext")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "deadline of the call")
	fs.BoolVar(&c.insecure, "insecure", false, "send the --token-env token without --tls-ca to a non-loopback address (in plaintext)")
}

func (c *clientFlags) dial() (*grpc.ClientConn, context.Context, context.CancelFunc, error) {
	if err := c.checkTokenTransport(); err != nil {
		return nil, nil, nil, err
	}
	creds := insecure.NewCredentials()
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", c.caFile)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	if c.tokenEnv != "" {
		tok := os.Getenv(c.tokenEnv)
		if tok == "" {
			cancel()
			conn.Close()
			return nil, nil, nil, fmt.Errorf("--token-env: %s is not set", c.tokenEnv)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	return conn, ctx, cancel, nil
}

// callError prints a daemon refusal as JSON on stdout and picks the exit code.
func callError(stdout, stderr io.Writer, err error) int {
	st, ok := status.FromError(err)
	if !ok {
		fmt.Fprintln(stderr, "verifyctl:", err)
		return exitFailure
	}
	out := map[string]any{"code": st.Code().String(), "message": st.Message()}
	for _, d := range st.Details() {
		switch x := d.(type) {
		case *errdetails.BadRequest:
			if len(x.FieldViolations) > 0 {
				out["path"] = x.FieldViolations[0].Field
			}
		case *errdetails.ErrorInfo:
			if x.Domain == receiptDomain {
				// A refused Begin recorded in the ledger, with its receipt.
				out["terminal_outcome"] = x.Metadata["terminal_outcome"]
				if r := x.Metadata["receipt"]; r != "" {
					out["receipt"] = json.RawMessage(r)
				}
				continue
			}
			out["reason"] = x.Reason
		}
	}
	writeJSON(stdout, map[string]any{"error": out})
	switch st.Code() {
	case codes.InvalidArgument:
		return exitInvalid
	case codes.FailedPrecondition, codes.PermissionDenied:
		return exitRefused
	}
	return exitFailure
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "verifyctl: "+format+"\n", args...)
	return exitInvalid
}

// clientCommand runs one call against the daemon's VerifierService: parse
// the flags (the shared client flags plus the command's own, registered by
// flags), check them, dial, call, and print the answer as JSON.
func clientCommand(name string, args []string, stdout, stderr io.Writer,
	flags func(fs *flag.FlagSet) (check func() error),
	call func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error)) int {
	return serviceCommand(name, args, stdout, stderr, verifierv1.NewVerifierServiceClient, flags, call)
}

// serviceCommand is clientCommand for any of the daemon's services.
func serviceCommand[C any](name string, args []string, stdout, stderr io.Writer,
	newClient func(grpc.ClientConnInterface) C,
	flags func(fs *flag.FlagSet) (check func() error),
	call func(ctx context.Context, c C) (any, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	check := flags(fs)
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	if err := check(); err != nil {
		return usageError(stderr, "%s: %v", name, err)
	}
	conn, ctx, cancel, err := cf.dial()
	if err != nil {
		return usageError(stderr, "%v", err)
	}
	defer conn.Close()
	defer cancel()
	out, err := call(ctx, newClient(conn))
	if err != nil {
		return callError(stdout, stderr, err)
	}
	writeJSON(stdout, out)
	return exitOK
}

// cmdPreflight tests every candidate's connection. It prints the answer
// whatever it is, and exits 0 only when every candidate was configured and
// is reachable and Begin would not refuse every change claim of the
// registered workflow steps (require_proven_newness) through the
// candidate it would select: 1 names what is not ready on stderr.
func cmdPreflight(args []string, stdout, stderr io.Writer) int {
	var deployment, deploymentName string
	ps := params{}
	var dep string
	var down []string
	code := clientCommand("preflight", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&deploymentName, "deployment-name", "", "name of a deployment in the daemon config")
		fs.StringVar(&deployment, "deployment", "", "deployment file (YAML); only a daemon run with --allow-inline-deployments accepts it")
		fs.Var(ps, "param", "run parameter name=value (repeatable)")
		return func() (err error) {
			if (deployment == "") == (deploymentName == "") {
				return fmt.Errorf("needs one of --deployment-name NAME or --deployment FILE")
			}
			if deployment != "" {
				var raw []byte
				raw, err = os.ReadFile(deployment)
				dep = string(raw)
			}
			return err
		}
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.TestConnection(ctx, &verifierv1.TestConnectionRequest{DeploymentYaml: dep, DeploymentName: deploymentName, Params: verifierv1.StringParams(ps)})
		if err != nil {
			return nil, err
		}
		out := []map[string]any{}
		if len(res.GetCandidates()) == 0 {
			down = append(down, "the daemon reported no candidate")
		}
		down = append(down, newnessRefusals(res)...)
		for _, cand := range res.GetCandidates() {
			if !cand.GetReachable() {
				down = append(down, fmt.Sprintf("candidate %d (%s): %s", cand.GetCandidateIndex(), cand.GetKind(), cand.GetMessage()))
			}
			warnings := cand.GetWarnings()
			if warnings == nil {
				warnings = []string{}
			}
			narrowing := cand.GetNarrowing()
			if narrowing == nil {
				narrowing = []string{}
			}
			entry := map[string]any{
				"candidate_index": cand.GetCandidateIndex(), "kind": cand.GetKind(), "tier": cand.GetTier(),
				"reachable": cand.GetReachable(), "message": cand.GetMessage(), "warnings": warnings,
				"newness": cand.GetNewness(), "newness_declared": cand.GetNewnessDeclared(), "narrowing": narrowing,
			}
			if r := cand.GetNewnessRefusal(); r != "" {
				entry["newness_refusal"] = r
			}
			out = append(out, entry)
		}
		return out, nil
	})
	if code == exitOK && len(down) > 0 {
		for _, d := range down {
			fmt.Fprintln(stderr, "verifyctl: preflight: not ready:", d)
		}
		return exitFailure
	}
	return code
}

func cmdBegin(args []string, stdout, stderr io.Writer) int {
	var deployment, deploymentName, effects string
	ps := params{}
	req := &verifierv1.BeginRequest{}
	return clientCommand("begin", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&deploymentName, "deployment-name", "", "name of a deployment in the daemon config")
		fs.StringVar(&deployment, "deployment", "", "deployment file (YAML); only a daemon run with --allow-inline-deployments accepts it")
		fs.StringVar(&req.Workflow, "workflow", "", "name of a workflow in the daemon config (with --step, instead of --effects)")
		fs.StringVar(&req.Step, "step", "", "step of the --workflow whose registered contracts to judge")
		fs.StringVar(&effects, "effects", "", "effects file: a YAML or JSON list of contracts")
		fs.StringVar(&req.RunId, "run", "", "run id from run begin (with --step): the workflow and deployment come from the run")
		fs.Var(ps, "param", "run parameter name=value (repeatable); with --run, the step's own parameters only")
		return func() error {
			if req.RunId != "" {
				// A step of a run: the run names the workflow and the
				// deployment, and holds the run's parameters.
				if deployment != "" || deploymentName != "" || req.Workflow != "" || effects != "" {
					return fmt.Errorf("with --run the workflow and deployment come from the run: drop --deployment-name, --deployment, --workflow and --effects, and name the step with --step")
				}
				if req.Step == "" {
					return fmt.Errorf("with --run, needs --step NAME")
				}
				req.Params = verifierv1.StringParams(ps)
				return nil
			}
			if (deployment == "") == (deploymentName == "") {
				return fmt.Errorf("needs one of --deployment-name NAME or --deployment FILE")
			}
			registered := req.Workflow != "" || req.Step != ""
			if registered == (effects != "") || (registered && (req.Workflow == "" || req.Step == "")) {
				return fmt.Errorf("needs --workflow NAME --step NAME, or --effects FILE")
			}
			if deployment != "" {
				dep, err := os.ReadFile(deployment)
				if err != nil {
					return err
				}
				req.Deployment = &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: string(dep)}
			} else {
				req.Deployment = &verifierv1.BeginRequest_DeploymentName{DeploymentName: deploymentName}
			}
			req.Params = verifierv1.StringParams(ps)
			if effects == "" {
				return nil
			}
			eff, err := os.ReadFile(effects)
			req.Effects = string(eff)
			return err
		}
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.Begin(ctx, req)
		if err != nil {
			return nil, err
		}
		if u := res.GetUnusedParams(); len(u) > 0 {
			fmt.Fprintf(stderr, "verifyctl: begin: warning: no contract or candidate of the step uses --param %s (a misspelt name?); the session was begun\n", strings.Join(u, ", "))
		}
		return beginJSON(res), nil
	})
}

func beginJSON(res *verifierv1.BeginResponse) map[string]any {
	effects := []map[string]any{}
	for _, e := range res.GetEffects() {
		effects = append(effects, map[string]any{
			"contract_hash": e.GetContractHash(), "tier": e.GetTier(),
			"candidate": e.GetCandidate(), "candidate_index": e.GetCandidateIndex(),
		})
	}
	unused := res.GetUnusedParams()
	if unused == nil {
		unused = []string{}
	}
	return map[string]any{"session_id": res.GetSessionId(), "effects": effects, "registered_step": registeredJSON(res.GetRegisteredStep()), "unused_params": unused}
}

// registeredJSON renders the registered workflow step of a session, or nil.
func registeredJSON(r *verifierv1.RegisteredStep) any {
	if r == nil {
		return nil
	}
	return map[string]any{"workflow": r.GetWorkflow(), "workflow_digest": r.GetWorkflowDigest(), "step": r.GetStep()}
}

// sessionFlag registers --session and checks it was given.
func sessionFlag(id *string) func(fs *flag.FlagSet) func() error {
	return func(fs *flag.FlagSet) func() error {
		fs.StringVar(id, "session", "", "session id from begin")
		return func() error {
			if *id == "" {
				return fmt.Errorf("needs --session ID")
			}
			return nil
		}
	}
}

func cmdVerify(args []string, stdout, stderr io.Writer) int {
	var id, receiptOut string
	return clientCommand("verify", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&receiptOut, "receipt-out", "", "also write the signed receipt (DSSE envelope JSON) alone to this file")
		return sessionFlag(&id)(fs)
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: id})
		if err != nil {
			return nil, err
		}
		out := stepJSON(res.GetOutcome(), res.GetTerminalOutcome(), res.GetEffects())
		out["session_id"] = res.GetSessionId()
		out["registered_step"] = registeredJSON(res.GetRegisteredStep())
		out["receipt"] = receiptJSON(res.GetReceipt())
		if err := saveReceipt(receiptOut, res.GetReceipt()); err != nil {
			return nil, err
		}
		return out, nil
	})
}

func cmdSession(args []string, stdout, stderr io.Writer) int {
	var id string
	return clientCommand("session", args, stdout, stderr, sessionFlag(&id), func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: id})
		if err != nil {
			return nil, err
		}
		out := map[string]any{
			"session_id": res.GetSessionId(),
			"state":      res.GetState().String(),
			"begin":      beginJSON(res.GetBegin()),
			"begun_at":   res.GetBegunAt().AsTime().Format(time.RFC3339Nano),
			"result":     nil,
		}
		if res.GetResult() != nil {
			out["result"] = resultJSON(res.GetResult())
			out["receipt"] = receiptJSON(res.GetReceipt())
		}
		revs := []map[string]any{}
		for _, r := range res.GetReverifications() {
			revs = append(revs, reverificationJSON(r))
		}
		out["reverifications"] = revs
		return out, nil
	})
}

// resultJSON renders a StepResult as stepJSON does.
func resultJSON(r *verifierv1.StepResult) map[string]any {
	return stepJSON(r.GetOutcome(), r.GetTerminalOutcome(), r.GetEffects())
}

// stepJSON renders a judgement in the shape of `verifyctl judge`, plus the
// tier, substrate and reconciliation task of each effect: the outcome at
// the top, as the API's VerifyResponse and JudgeResponse carry it, and
// enum values as the API's JSON writes them.
func stepJSON(outcome, terminal verifierv1.Outcome, es []*verifierv1.EffectResult) map[string]any {
	effects := []map[string]any{}
	for _, e := range es {
		reasons := []map[string]string{}
		for _, rs := range e.GetReasons() {
			reasons = append(reasons, map[string]string{"code": rs.GetCode(), "message": rs.GetMessage()})
		}
		matched := []map[string]any{}
		for _, m := range e.GetMatchedRecords() {
			matched = append(matched, m.AsMap())
		}
		var task any
		if t := e.GetReconciliationTask(); t != nil {
			ev := t.GetEvidence()
			digests := ev.GetRecordDigests()
			if digests == nil {
				digests = []string{}
			}
			task = map[string]any{
				"id": t.GetId(), "kind": t.GetKind().String(),
				"substrate": t.GetSubstrate(), "effect_kind": t.GetEffectKind(), "contract_hash": t.GetContractHash(),
				"verdict": t.GetVerdict().String(), "reason_codes": t.GetReasonCodes(),
				"evidence": map[string]any{
					"observed_count": ev.ObservedCount, "expected_count": ev.ExpectedCount,
					"values_match": ev.ValuesMatch, "record_digests": digests,
				},
				"suggested_action": t.GetSuggestedAction().String(),
			}
		}
		effect := map[string]any{
			"verdict":             e.GetVerdict().String(),
			"result":              e.GetResult().String(),
			"reasons":             reasons,
			"observed_count":      e.ObservedCount,
			"expected_count":      e.ExpectedCount,
			"observed_value":      e.ObservedValue,
			"expected_value":      e.ExpectedValue,
			"contract_hash":       e.GetContractHash(),
			"matched_records":     matched,
			"tier":                e.GetTier(),
			"oracle_rung":         e.GetOracleRung(),
			"substrate":           e.GetSubstrate(),
			"reconciliation_task": task,
		}
		// How the read proved newness and what its loss checks saw; absent
		// from a pure judgement, where no candidate read anything.
		if n := e.GetNewness(); n != "" {
			effect["newness"] = n
		}
		if s := e.GetCensusScope(); s != "" {
			effect["census_scope"] = s
		}
		if s := e.GetCollateralScope(); s != "" {
			effect["collateral_scope"] = s
		}
		effects = append(effects, effect)
	}
	out := map[string]any{"outcome": outcome.String(), "effects": effects}
	if terminal != verifierv1.Outcome_OUTCOME_UNSPECIFIED {
		out["terminal_outcome"] = terminal.String()
	}
	return out
}

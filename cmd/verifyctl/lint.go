package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// exitFindings is lint's exit code for findings under
// --require-effects-for-irreversible.
const exitFindings = 1

// lintReport is what `verifyctl lint` prints.
type lintReport struct {
	Workflow string        `json:"workflow"`
	Coverage lintCoverage  `json:"coverage"`
	Findings []lintFinding `json:"findings"`
	// Oracle is present only with --deployment-name.
	Oracle *lintOracle `json:"oracle,omitempty"`
}

func cmdLint(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	path := fs.String("workflow", "", "workflow file (verifierd.workflow/v1)")
	deploymentName := fs.String("deployment-name", "", "deployment in the daemon config whose selected candidate's tier and newness to check")
	deploymentFile := fs.String("deployment", "", "deployment file whose reads to check (capped_read, no_settle_window); read locally, no daemon")
	requireEffects := fs.Bool("require-effects-for-irreversible", false, "exit 1 when there is any finding")
	ps := params{}
	fs.Var(ps, "param", "run parameter name=value for the connection test (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	if *path == "" || fs.NArg() > 0 {
		return usageError(stderr, "lint: needs --workflow FILE and no other arguments")
	}
	w, err := workflow.Load(*path)
	if err != nil {
		return workflowError(stdout, placeholderError(*path, err))
	}
	report := lintWorkflow(w)
	if *deploymentFile != "" {
		dep, err := config.ReadDeployment(*deploymentFile)
		if err != nil {
			return fileError(stdout, "INVALID_DEPLOYMENT", err)
		}
		report.Findings = sortFindings(w, append(report.Findings, readFindings(w, dep)...))
	}
	if *deploymentName != "" {
		conn, ctx, cancel, err := cf.dial()
		if err != nil {
			return usageError(stderr, "%v", err)
		}
		defer conn.Close()
		defer cancel()
		res, err := testConnectionByName(ctx, verifierv1.NewVerifierServiceClient(conn), *deploymentName, ps)
		if err != nil {
			return callError(stdout, stderr, err)
		}
		oracle, findings := tierFindings(w, *deploymentName, res)
		report.Oracle = oracle
		report.Findings = sortFindings(w, append(report.Findings, findings...))
	}
	writeJSON(stdout, report)
	if *requireEffects && len(report.Findings) > 0 {
		return exitFindings
	}
	return exitOK
}

// testConnectionByName asks the daemon to test the candidates of a
// deployment registered in its config.
func testConnectionByName(ctx context.Context, c verifierv1.VerifierServiceClient, name string, ps map[string]string) (*verifierv1.TestConnectionResponse, error) {
	return c.TestConnection(ctx, &verifierv1.TestConnectionRequest{DeploymentName: name, Params: verifierv1.StringParams(ps)})
}

// workflowError prints an unreadable or invalid workflow file as the JSON
// error shape of the client commands.
// placeholderError is err, the refusal of the workflow file at path, or,
// when the file holds a placeholder contract (kind: placeholder), a
// refusal naming the first one and the way to replace it.
func placeholderError(path string, err error) error {
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return err
	}
	tree, derr := judge.DecodeDocument(data)
	m, _ := tree.(map[string]any)
	steps, _ := m["steps"].([]any)
	if derr != nil {
		return err
	}
	for i, st := range steps {
		sm, _ := st.(map[string]any)
		effects, _ := sm["effects"].([]any)
		for j, e := range effects {
			if isPlaceholder(e) {
				return fmt.Errorf("%s: %w", path, &refusal.Error{Path: fmt.Sprintf("steps[%d].effects[%d]", i, j),
					Message: "a placeholder stands where a reviewed contract must be, and no step with one can run; write the contract in a binding file and run verifyctl bind, which replaces the placeholder"})
			}
		}
	}
	return err
}

func workflowError(stdout io.Writer, err error) int {
	return fileError(stdout, "INVALID_WORKFLOW", err)
}

// fileError prints an unreadable or invalid input file under code.
func fileError(stdout io.Writer, code string, err error) int {
	out := map[string]any{"code": code, "message": err.Error(), "path": ""}
	if r, ok := refusal.As(err); ok {
		out["message"], out["path"] = r.Message, r.Path
	}
	writeJSON(stdout, map[string]any{"error": out})
	return exitInvalid
}

// lintCoverage counts the irreversible steps that carry a contract.
type lintCoverage struct {
	IrreversibleSteps int     `json:"irreversible_steps"`
	WithContract      int     `json:"with_contract"`
	Percent           float64 `json:"percent"`
}

// lintFinding is one guard a step breaks. Effect is the index of the effect
// in the step, or null for a finding about the whole step.
type lintFinding struct {
	Code    string `json:"code"`
	Step    string `json:"step"`
	Effect  *int   `json:"effect"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// lintWorkflow applies the guards that need no daemon: contracts on
// irreversible steps, the change claim, subject selection and secret
// parameters, under the workflow's own policy over the defaults.
func lintWorkflow(w *workflow.Workflow) lintReport {
	p := workflow.Resolve(w.Policy)
	secret := w.SecretParams()
	report := lintReport{Workflow: w.Name, Findings: []lintFinding{}}
	for i, s := range w.Steps {
		path := fmt.Sprintf("steps[%d].effects", i)
		if s.Risk == workflow.RiskIrreversible {
			report.Coverage.IrreversibleSteps++
			if len(s.Effects) > 0 {
				report.Coverage.WithContract++
			} else {
				report.Findings = append(report.Findings, lintFinding{Code: workflow.CodeMissingEffectContract, Step: s.Name, Path: path,
					Message: "an irreversible step has no effect contract, so nothing proves its write; bind reviewed contracts with verifyctl bind, or add effects: to the step"})
			}
		}
		if len(s.Effects) == 0 {
			continue
		}
		sp := p.ForStep(&w.Steps[i])
		for _, f := range workflow.CheckContracts(sp, s.Effects, secret, path) {
			report.Findings = append(report.Findings, fromFinding(s.Name, f))
		}
		// A step that names its own subject_params, even none, has
		// said what selects its subject.
		if len(sp.SubjectParams) > 0 || s.SubjectParams != nil {
			continue
		}
		// With no subject_params in the policy, a contract must still select
		// its record through some run parameter; otherwise any run's record
		// (or another subject's) would satisfy it.
		for j, e := range s.Effects {
			if e.Kind != judge.RecordWritten && e.Kind != judge.FieldEquals && e.Kind != judge.ExactNewSet {
				continue
			}
			if len(workflow.SelectorParams(e)) == 0 {
				report.Findings = append(report.Findings, lintFinding{Code: workflow.CodeSubjectNotSelected, Step: s.Name, Effect: new(j),
					Path:    fmt.Sprintf("%s[%d]", path, j),
					Message: "the contract selects its record through no run parameter (match, new_records or idempotency_key), so another run's or another subject's record would pass; add e.g. match: {id: {param: record_id}}"})
			}
		}
	}
	if n := report.Coverage.IrreversibleSteps; n == 0 {
		report.Coverage.Percent = 100
	} else {
		report.Coverage.Percent = math.Round(1000*float64(report.Coverage.WithContract)/float64(n)) / 10
	}
	report.Findings = sortFindings(w, report.Findings)
	return report
}

// lintOracle is the candidate the daemon would select for the deployment:
// the reachable candidate of the strongest tier, ties to the first declared.
type lintOracle struct {
	DeploymentName string  `json:"deployment_name"`
	Reachable      bool    `json:"reachable"`
	CandidateIndex *int32  `json:"candidate_index"`
	Kind           *string `json:"kind"`
	Tier           *int32  `json:"tier"`
	// Message says why no candidate was selected.
	Message string `json:"message,omitempty"`
}

// tierFindings applies the tier guards to the candidate the daemon would
// select from a TestConnection answer. With no reachable candidate it
// reports the oracle as unreachable and finds nothing: a tier cannot be
// judged from a connection that failed.
//
// Newness needs no connection: what narrows a read is in the deployment's
// templates, whatever the run's values. With no reachable candidate (as
// when lint runs without --param) every candidate is checked, since any of
// them may be the one selected.
func tierFindings(w *workflow.Workflow, deployment string, res *verifierv1.TestConnectionResponse) (*lintOracle, []lintFinding) {
	oracle := &lintOracle{DeploymentName: deployment}
	p := workflow.Resolve(w.Policy)
	selected, reasons := selectCandidate(res)
	if selected == nil {
		oracle.Message = "no candidate is reachable, so no tier was checked"
		if len(reasons) > 0 {
			oracle.Message += ": " + strings.Join(reasons, "; ")
		}
		var readers []workflow.Reader
		for _, c := range res.GetCandidates() {
			readers = append(readers, connReader(c))
		}
		return oracle, newnessFindings(w, p, readers)
	}
	idx, kind, tier := selected.GetCandidateIndex(), selected.GetKind(), selected.GetTier()
	oracle.Reachable, oracle.CandidateIndex, oracle.Kind, oracle.Tier = true, &idx, &kind, &tier
	candidate := fmt.Sprintf("%d (%s)", idx, kind)
	var out []lintFinding
	for i, s := range w.Steps {
		for j := range s.Effects {
			path := fmt.Sprintf("steps[%d].effects[%d]", i, j)
			// Tiers 3 and 4 read the application's own screen: at tier 4 the
			// session the automation acted in, at tier 3 a fresh one of the
			// same application. Either way the oracle is the acting surface.
			if tier == 3 || tier == 4 {
				out = append(out, lintFinding{Code: workflow.CodeSameChannelOracle, Step: s.Name, Effect: new(j), Path: path,
					Message: fmt.Sprintf("the selected candidate %s reads at tier %d, the screen of the application the automation wrote through; it can confirm what that application shows, not what the system of record holds; offer a tier 1 or 2 candidate in the deployment", candidate, tier)})
			}
			for _, f := range workflow.CheckTier(p, int(tier), candidate, j, path) {
				out = append(out, fromFinding(s.Name, f))
			}
		}
	}
	return oracle, append(out, newnessFindings(w, p, []workflow.Reader{connReader(selected)})...)
}

// selectCandidate is the candidate the daemon would select from a
// TestConnection answer: the reachable one of the strongest tier, ties to
// the first declared; nil, with why each is not, when none is reachable.
func selectCandidate(res *verifierv1.TestConnectionResponse) (*verifierv1.CandidateConnection, []string) {
	var selected *verifierv1.CandidateConnection
	var reasons []string
	for _, c := range res.GetCandidates() {
		if !c.GetReachable() {
			reasons = append(reasons, fmt.Sprintf("candidate %d (%s): %s", c.GetCandidateIndex(), c.GetKind(), c.GetMessage()))
			continue
		}
		if selected == nil || c.GetTier() < selected.GetTier() {
			selected = c
		}
	}
	return selected, reasons
}

// connReader is a TestConnection candidate as the newness guard sees it.
func connReader(c *verifierv1.CandidateConnection) workflow.Reader {
	r := workflow.Reader{Name: fmt.Sprintf("%d (%s)", c.GetCandidateIndex(), c.GetKind()), Narrowing: c.GetNarrowing()}
	if c.GetNewnessDeclared() {
		if n := c.GetNewness(); n == "census" {
			r.Census = true
		} else {
			r.Newness = n
		}
	}
	return r
}

// newnessFindings applies require_proven_newness to every change claim of
// w read through any of readers: one finding per refused effect, naming
// the first candidate that refuses it and the others that would too.
func newnessFindings(w *workflow.Workflow, p workflow.Effective, readers []workflow.Reader) []lintFinding {
	var out []lintFinding
	for i, s := range w.Steps {
		for j, e := range s.Effects {
			path := fmt.Sprintf("steps[%d].effects[%d]", i, j)
			var first *workflow.Finding
			var others []string
			for _, r := range readers {
				fs := workflow.CheckNewness(p.ForStep(&w.Steps[i]), e, r, j, path)
				switch {
				case len(fs) == 0:
				case first == nil:
					first = &fs[0]
				default:
					others = append(others, r.Name)
				}
			}
			if first == nil {
				continue
			}
			f := fromFinding(s.Name, *first)
			if len(others) > 0 {
				f.Message += fmt.Sprintf(" (candidates %s would be refused too)", strings.Join(others, ", "))
			}
			out = append(out, f)
		}
	}
	return out
}

// newnessRefusals are the require_proven_newness refusals preflight must
// report: the selected candidate's, or every candidate's when none is
// reachable (any may be selected once it is).
func newnessRefusals(res *verifierv1.TestConnectionResponse) []string {
	list := res.GetCandidates()
	if selected, _ := selectCandidate(res); selected != nil {
		list = []*verifierv1.CandidateConnection{selected}
	}
	var out []string
	for _, c := range list {
		if r := c.GetNewnessRefusal(); r != "" {
			out = append(out, fmt.Sprintf("candidate %d (%s): %s", c.GetCandidateIndex(), c.GetKind(), r))
		}
	}
	return out
}

func fromFinding(step string, f workflow.Finding) lintFinding {
	out := lintFinding{Code: f.Code, Step: step, Path: f.Path, Message: f.Message}
	if f.Effect >= 0 {
		out.Effect = new(f.Effect)
	}
	return out
}

// sortFindings orders findings by step, then the step's own findings before
// its effects', then effect index; codes keep the order they were found in.
// Findings about the deployment (step "") come last.
func sortFindings(w *workflow.Workflow, fs []lintFinding) []lintFinding {
	order := map[string]int{"": len(w.Steps)}
	for i, s := range w.Steps {
		order[s.Name] = i
	}
	effect := func(f lintFinding) int {
		if f.Effect == nil {
			return -1
		}
		return *f.Effect
	}
	slices.SortStableFunc(fs, func(a, b lintFinding) int {
		return cmp.Or(cmp.Compare(order[a.Step], order[b.Step]), cmp.Compare(effect(a), effect(b)))
	})
	return fs
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/internal/workflow"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

const claimIntake = "../../examples/claim-intake/"

// runCLI runs verifyctl in-process and returns stdout and the exit code.
func runCLI(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Logf("stderr: %s", stderr.String())
	}
	return stdout.Bytes(), code
}

func decodeLint(t *testing.T, out []byte) lintReport {
	t.Helper()
	var r lintReport
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	for _, f := range r.Findings {
		if f.Message == "" {
			t.Errorf("finding %+v has no message", f)
		}
	}
	return r
}

// ignoreMessages compares findings field by field except the prose, which
// the tests check by a phrase where it matters.
var ignoreMessages = cmpopts.IgnoreFields(lintFinding{}, "Message")

func finding(code, step string, effect int, path string) lintFinding {
	f := lintFinding{Code: code, Step: step, Path: path}
	if effect >= 0 {
		f.Effect = new(effect)
	}
	return f
}

func TestLintClaimIntake(t *testing.T) {
	t.Parallel()
	want := lintReport{
		Workflow: "claim-intake",
		Coverage: lintCoverage{IrreversibleSteps: 1, WithContract: 0, Percent: 0},
		Findings: []lintFinding{finding(workflow.CodeMissingEffectContract, "save_claim", -1, "steps[2].effects")},
	}
	out, code := runCLI(t, "lint", "--workflow", claimIntake+"workflow.yaml")
	if code != exitOK {
		t.Fatalf("exit %d, want 0 without --require-effects-for-irreversible: %s", code, out)
	}
	got := decodeLint(t, out)
	if diff := cmp.Diff(want, got, ignoreMessages); diff != "" {
		t.Fatalf("lint (-want +got):\n%s", diff)
	}
	// The effect of a step-level finding is JSON null, not absent and not 0.
	var raw struct {
		Findings []map[string]any `json:"findings"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	if v, present := raw.Findings[0]["effect"]; !present || v != nil {
		t.Fatalf("effect of a step-level finding: %v (present %v), want null", v, present)
	}
	out, code = runCLI(t, "lint", "--workflow", claimIntake+"workflow.yaml", "--require-effects-for-irreversible")
	if code != exitFindings {
		t.Fatalf("exit %d under --require-effects-for-irreversible, want 1: %s", code, out)
	}
	if diff := cmp.Diff(want, decodeLint(t, out), ignoreMessages); diff != "" {
		t.Fatalf("lint --require (-want +got):\n%s", diff)
	}
}

func TestLintUnselected(t *testing.T) {
	t.Parallel()
	out, code := runCLI(t, "lint", "--workflow", "testdata/lint/unselected.yaml", "--require-effects-for-irreversible")
	if code != exitFindings {
		t.Fatalf("exit %d, want 1: %s", code, out)
	}
	want := lintReport{
		Workflow: "unselected",
		Coverage: lintCoverage{IrreversibleSteps: 3, WithContract: 1, Percent: 33.3},
		Findings: []lintFinding{
			finding(workflow.CodeSubjectNotSelected, "place_order", 0, "steps[0].effects[0]"),
			finding(workflow.CodeMissingEffectContract, "confirm", -1, "steps[1].effects"),
			finding(workflow.CodeMissingEffectContract, "archive", -1, "steps[2].effects"),
		},
	}
	got := decodeLint(t, out)
	if diff := cmp.Diff(want, got, ignoreMessages); diff != "" {
		t.Fatalf("lint (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.Findings[0].Message, "no run parameter") {
		t.Errorf("message %q does not say the contract selects through no run parameter", got.Findings[0].Message)
	}
}

// connectionStub answers TestConnection with fixed candidates and records
// the deployment name it was asked for. A real daemon would need a
// registered deployment whose candidate reads at tier 4; what lint does with
// the answer is the same either way.
type connectionStub struct {
	verifierv1.UnimplementedVerifierServiceServer
	res   *verifierv1.TestConnectionResponse
	asked chan *verifierv1.TestConnectionRequest
}

func (s *connectionStub) TestConnection(_ context.Context, req *verifierv1.TestConnectionRequest) (*verifierv1.TestConnectionResponse, error) {
	s.asked <- req
	return s.res, nil
}

func startStub(t *testing.T, stub *connectionStub) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	verifierv1.RegisterVerifierServiceServer(srv, stub)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestLintEveryFinding(t *testing.T) {
	t.Parallel()
	stub := &connectionStub{asked: make(chan *verifierv1.TestConnectionRequest, 1), res: &verifierv1.TestConnectionResponse{
		Candidates: []*verifierv1.CandidateConnection{
			{CandidateIndex: 0, Kind: "sql", Tier: 1, Reachable: false, Message: "connection refused"},
			{CandidateIndex: 1, Kind: "screen", Tier: 4, Reachable: true},
		},
	}}
	addr := startStub(t, stub)
	out, code := runCLI(t, "lint", "--workflow", "testdata/lint/every-finding.yaml", "--deployment-name", "clinic",
		"--addr", addr, "--timeout", "20s", "--require-effects-for-irreversible")
	if code != exitFindings {
		t.Fatalf("exit %d, want 1: %s", code, out)
	}
	req := <-stub.asked
	if req.GetDeploymentName() != "clinic" || len(req.GetDeploymentYaml()) != 0 {
		t.Fatalf("TestConnection asked for %q (yaml %q), want the registered deployment clinic", req.GetDeploymentName(), req.GetDeploymentYaml())
	}
	idx, kind, tier := int32(1), "screen", int32(4)
	want := lintReport{
		Workflow: "every-finding",
		Coverage: lintCoverage{IrreversibleSteps: 2, WithContract: 1, Percent: 50},
		Findings: []lintFinding{
			finding(workflow.CodeMissingEffectContract, "submit_order", -1, "steps[0].effects"),
			finding(workflow.CodeNoChangeClaim, "set_note", -1, "steps[1].effects"),
			finding(workflow.CodeSubjectNotSelected, "set_note", 0, "steps[1].effects[0]"),
			finding(workflow.CodeSameChannelOracle, "set_note", 0, "steps[1].effects[0]"),
			finding(workflow.CodeWeakTier, "set_note", 0, "steps[1].effects[0]"),
			finding(workflow.CodeSecretParamInContract, "save_with_key", 0, "steps[2].effects[0]"),
			finding(workflow.CodeSameChannelOracle, "save_with_key", 0, "steps[2].effects[0]"),
			finding(workflow.CodeWeakTier, "save_with_key", 0, "steps[2].effects[0]"),
		},
		Oracle: &lintOracle{DeploymentName: "clinic", Reachable: true, CandidateIndex: &idx, Kind: &kind, Tier: &tier},
	}
	got := decodeLint(t, out)
	if diff := cmp.Diff(want, got, ignoreMessages); diff != "" {
		t.Fatalf("lint (-want +got):\n%s", diff)
	}
	for _, f := range got.Findings {
		if f.Code == workflow.CodeSecretParamInContract && !strings.Contains(f.Message, `"api_key"`) {
			t.Errorf("secret finding %q does not name api_key", f.Message)
		}
	}
}

// TestLintSameChannelAtTier3: a fresh on-screen session of the acting
// application (tier 3) is still the acting surface; lint says so through
// the CLI, as it does for tier 4.
func TestLintSameChannelAtTier3(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(wf, []byte(`schema: verifierd.workflow/v1
name: screen-only
params: {pid: {}}
steps:
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {pid: {param: pid}}, count_new_only: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := &connectionStub{asked: make(chan *verifierv1.TestConnectionRequest, 1), res: &verifierv1.TestConnectionResponse{
		Candidates: []*verifierv1.CandidateConnection{{CandidateIndex: 0, Kind: "onscreen", Tier: 3, Reachable: true}},
	}}
	out, code := runCLI(t, "lint", "--workflow", wf, "--deployment-name", "app", "--addr", startStub(t, stub), "--timeout", "20s", "--require-effects-for-irreversible")
	if code != exitFindings {
		t.Fatalf("exit %d, want %d: %s", code, exitFindings, out)
	}
	got := decodeLint(t, out)
	if len(got.Findings) != 1 || got.Findings[0].Code != workflow.CodeSameChannelOracle || got.Findings[0].Path != "steps[0].effects[0]" ||
		!strings.Contains(got.Findings[0].Message, "tier 3") {
		t.Fatalf("findings %+v, want one same_channel_oracle at steps[0].effects[0] naming tier 3", got.Findings)
	}
}

func TestTierFindings(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse([]byte(`schema: verifierd.workflow/v1
name: tiers
params: {pid: {}}
policy: {min_tier: 2}
steps:
  - step: open
    risk: read_only
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {pid: {param: pid}}, count_new_only: true}
      - {kind: field_equals, match: {pid: {param: pid}}, field: status, value: done}
`))
	if err != nil {
		t.Fatal(err)
	}
	cand := func(i int32, kind string, tier int32, reachable bool) *verifierv1.CandidateConnection {
		return &verifierv1.CandidateConnection{CandidateIndex: i, Kind: kind, Tier: tier, Reachable: reachable, Message: kind + " says no"}
	}
	both := func(code string) []lintFinding {
		return []lintFinding{finding(code, "save", 0, "steps[1].effects[0]"), finding(code, "save", 1, "steps[1].effects[1]")}
	}
	for name, tc := range map[string]struct {
		cands    []*verifierv1.CandidateConnection
		codes    [][]lintFinding
		selected int32 // -1: none reachable
	}{
		"tier 4 is the same channel and below min_tier 2": {
			cands:    []*verifierv1.CandidateConnection{cand(0, "screen", 4, true)},
			codes:    [][]lintFinding{both(workflow.CodeSameChannelOracle), both(workflow.CodeWeakTier)},
			selected: 0,
		},
		"tier 3 is the same channel and below min_tier 2": {
			cands:    []*verifierv1.CandidateConnection{cand(0, "screen", 4, true), cand(1, "onscreen", 3, true)},
			codes:    [][]lintFinding{both(workflow.CodeSameChannelOracle), both(workflow.CodeWeakTier)},
			selected: 1,
		},
		"the strongest reachable candidate is selected": {
			cands:    []*verifierv1.CandidateConnection{cand(0, "sql", 1, false), cand(1, "ui_readback", 2, true), cand(2, "rest", 2, true)},
			selected: 1,
		},
		"nothing reachable: no tier finding": {
			cands:    []*verifierv1.CandidateConnection{cand(0, "sql", 1, false), cand(1, "screen", 4, false)},
			selected: -1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			oracle, got := tierFindings(w, "d", &verifierv1.TestConnectionResponse{Candidates: tc.cands})
			var want []lintFinding
			// Same-channel first, then weak tier, per effect, as lint sorts them.
			if len(tc.codes) > 0 {
				for i := range tc.codes[0] {
					for _, c := range tc.codes {
						want = append(want, c[i])
					}
				}
			}
			if diff := cmp.Diff(want, sortFindings(w, got), ignoreMessages); diff != "" {
				t.Fatalf("findings (-want +got):\n%s", diff)
			}
			if tc.selected < 0 {
				if oracle.Reachable || oracle.Tier != nil || !strings.Contains(oracle.Message, "sql says no") {
					t.Fatalf("oracle %+v, want unreachable with the candidates' messages", oracle)
				}
				return
			}
			if !oracle.Reachable || *oracle.CandidateIndex != tc.selected || *oracle.Tier != tc.cands[tc.selected].Tier || oracle.Message != "" {
				t.Fatalf("oracle %+v, want candidate %d", oracle, tc.selected)
			}
		})
	}
}

func TestLintInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("schema: verifierd.workflow/v1\nname: w\nsteps: [{step: s, risk: maybe}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badEffect := filepath.Join(dir, "bad-effect.yaml")
	if err := os.WriteFile(badEffect, []byte("schema: verifierd.workflow/v1\nname: w\nsteps: [{step: s, effects: [{kind: nope}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		path string // "" with no JSON: a usage error on stderr
	}{
		"no workflow":  {args: []string{"lint"}},
		"bad flag":     {args: []string{"lint", "--workflow", bad, "--nope"}},
		"extra arg":    {args: []string{"lint", "--workflow", bad, "more"}},
		"missing file": {args: []string{"lint", "--workflow", filepath.Join(dir, "absent.yaml")}, path: "-"},
		"bad risk":     {args: []string{"lint", "--workflow", bad}, path: "steps[0].risk"},
		"bad effect":   {args: []string{"lint", "--workflow", badEffect}, path: "steps[0].effects[0].kind"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, code := runCLI(t, tc.args...)
			if code != exitInvalid {
				t.Fatalf("exit %d, want 2: %s", code, out)
			}
			if tc.path == "" {
				if len(out) != 0 {
					t.Fatalf("stdout %s on a usage error", out)
				}
				return
			}
			var got struct {
				Error struct{ Code, Message, Path string } `json:"error"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			wantPath := tc.path
			if wantPath == "-" {
				wantPath = ""
			}
			if got.Error.Code != "INVALID_WORKFLOW" || got.Error.Path != wantPath || got.Error.Message == "" {
				t.Fatalf("error %+v, want INVALID_WORKFLOW at %q", got.Error, wantPath)
			}
		})
	}
}

// TestLintDemoWorkflow lints the demo's registered workflow: one
// irreversible step, fully covered, no findings even under the strict flag.
func TestLintDemoWorkflow(t *testing.T) {
	t.Parallel()
	out, code := runCLI(t, "lint", "--workflow", "../../examples/demo/workflow.yaml", "--require-effects-for-irreversible")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	r := decodeLint(t, out)
	if r.Workflow != "triage" || r.Coverage.IrreversibleSteps != 1 || r.Coverage.WithContract != 1 || r.Coverage.Percent != 100 || len(r.Findings) != 0 {
		t.Fatalf("demo workflow: %+v", r)
	}
}

// TestNewnessFindings: with --deployment-name, a change claim whose
// selected candidate reads a narrowed collection without census or
// newness: is newness_unproven; field_equals never is.
func TestNewnessFindings(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse([]byte(`schema: verifierd.workflow/v1
name: newness
params: {pid: {}}
steps:
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {pid: {param: pid}}, count_new_only: true}
      - {kind: field_equals, match: {pid: {param: pid}}, field: status, value: done}
`))
	if err != nil {
		t.Fatal(err)
	}
	narrowed := []string{"sql_query_params binds the run parameter(s) pid"}
	for name, tc := range map[string]struct {
		cand *verifierv1.CandidateConnection
		want []lintFinding
	}{
		"narrowed without census": {
			cand: &verifierv1.CandidateConnection{Kind: "sql", Tier: 1, Reachable: true, Newness: "newly_matching", Narrowing: narrowed},
			want: []lintFinding{finding(workflow.CodeNewnessUnproven, "save", 0, "steps[0].effects[0]")},
		},
		"census": {
			cand: &verifierv1.CandidateConnection{Kind: "sql", Tier: 1, Reachable: true, Newness: "census", NewnessDeclared: true, Narrowing: narrowed},
		},
		"declared newly matching": {
			cand: &verifierv1.CandidateConnection{Kind: "sql", Tier: 1, Reachable: true, Newness: "newly_matching", NewnessDeclared: true, Narrowing: narrowed},
		},
		"unnarrowed": {
			cand: &verifierv1.CandidateConnection{Kind: "sql", Tier: 1, Reachable: true, Newness: "whole_read"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, got := tierFindings(w, "d", &verifierv1.TestConnectionResponse{Candidates: []*verifierv1.CandidateConnection{tc.cand}})
			if diff := cmp.Diff(tc.want, got, ignoreMessages); diff != "" {
				t.Fatalf("findings (-want +got):\n%s", diff)
			}
			for _, f := range got {
				if !strings.Contains(f.Message, narrowed[0]) || !strings.Contains(f.Message, "census:") {
					t.Errorf("message %q names neither the narrowing nor the fix", f.Message)
				}
			}
		})
	}
}

// TestLintReads: with --deployment FILE, lint reads the deployment's
// candidates: a sql query capped at its outermost statement is
// capped_read, and each change claim of an irreversible step that no
// settle window watches is no_settle_window; settle_s on every candidate,
// or a min_settle_s in the deployment's or the workflow's policy, clears
// the second, a cap inside a subquery the first.
func TestLintReads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const steps = `steps:
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {p: {param: p}}, count_new_only: true}
      - {kind: field_equals, match: {p: {param: p}}, field: note, value: {param: note}}
  - step: amend
    effects:
      - {kind: record_written, match: {p: {param: p}}, count_new_only: true}
  - step: pay
    effects:
      - {kind: exact_new_set, new_records: [{p: {param: p}}], expected_count: 1, risk: irreversible}
`
	wf := write("wf.yaml", "schema: verifierd.workflow/v1\nname: w\nparams: {p: {}, note: {}}\n"+steps)
	floored := write("floored.yaml", "schema: verifierd.workflow/v1\nname: w\nparams: {p: {}, note: {}}\npolicy: {min_settle_s: 1}\n"+steps)
	capped := write("capped.yaml", `effects:
  candidates:
    - {kind: sql, sqlite_database: x.db, sql_query: "SELECT id, p FROM t WHERE p = :p ORDER BY id LIMIT 100", sql_query_params: {p: {param: p}}}
    - {kind: sql, sqlite_database: x.db, sql_query: "SELECT id, p FROM t WHERE id IN (SELECT id FROM t LIMIT 5)", settle_s: 1}
`)
	settled := write("settled.yaml", `effects:
  kind: sql
  sqlite_database: x.db
  sql_query: "SELECT id, p FROM t"
  settle_s: 0.5
`)
	depFloor := write("dep-floor.yaml", "policy: {min_settle_s: 2}\neffects: {kind: sql, sqlite_database: x.db, sql_query: \"SELECT TOP 10 id FROM t\"}\n")
	// Each change claim over a narrowed read (a WHERE, a TOP) is
	// newness_unproven: the templates say so, no --param needed.
	unproven := func(settle bool, capped string) []lintFinding {
		var out []lintFinding
		for _, f := range []lintFinding{
			finding(workflow.CodeNewnessUnproven, "save", 0, "steps[0].effects[0]"),
			finding(codeNoSettleWindow, "save", 0, "steps[0].effects[0]"),
			finding(workflow.CodeNewnessUnproven, "amend", 0, "steps[1].effects[0]"),
			finding(workflow.CodeNewnessUnproven, "pay", 0, "steps[2].effects[0]"),
			finding(codeNoSettleWindow, "pay", 0, "steps[2].effects[0]"),
		} {
			if settle || f.Code != codeNoSettleWindow {
				out = append(out, f)
			}
		}
		return append(out, finding(codeCappedRead, "", -1, capped))
	}
	for name, tc := range map[string]struct {
		workflow, deployment string
		want                 []lintFinding
	}{
		"capped and unsettled": {wf, capped, unproven(true, "effects.candidates[0].sql_query")},
		"settled candidate":    {wf, settled, nil},
		"workflow floor":       {floored, capped, unproven(false, "effects.candidates[0].sql_query")},
		"deployment floor":     {wf, depFloor, unproven(false, "effects.sql_query")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, code := runCLI(t, "lint", "--workflow", tc.workflow, "--deployment", tc.deployment)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, out)
			}
			got := decodeLint(t, out)
			if diff := cmp.Diff(tc.want, got.Findings, ignoreMessages, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("findings (-want +got):\n%s", diff)
			}
			for _, f := range got.Findings {
				switch f.Code {
				case codeCappedRead:
					if !strings.Contains(f.Message, "LIMIT") && !strings.Contains(f.Message, "TOP") {
						t.Errorf("capped_read %q does not name the cap", f.Message)
					}
				case codeNoSettleWindow:
					if !strings.Contains(f.Message, "min_settle_s") || !strings.Contains(f.Message, "effects.candidates[0] (sql)") {
						t.Errorf("no_settle_window %q does not name the unsettled candidate and the fix", f.Message)
					}
				case workflow.CodeNewnessUnproven:
					if !strings.Contains(f.Message, "census:") || !strings.Contains(f.Message, "sql_query ") {
						t.Errorf("newness_unproven %q does not name the narrowing and the fix", f.Message)
					}
				}
			}
		})
	}
	out, code := runCLI(t, "lint", "--workflow", wf, "--deployment", write("bad.yaml", "effects: {kind: sql, settle_s: -1}\n"))
	if code != exitInvalid || !strings.Contains(string(out), "INVALID_DEPLOYMENT") || !strings.Contains(string(out), "effects.settle_s") {
		t.Errorf("bad deployment: exit %d %s; want exit 2 naming effects.settle_s", code, out)
	}
}

// TestLintNewnessWithoutParams: lint finds a change claim that Begin would
// refuse under require_proven_newness from the deployment's templates
// alone: through a deployment file with no --param at all, and from a
// TestConnection answer in which no candidate is reachable (as when the
// run's parameters were not given), where every candidate is checked.
func TestLintNewnessWithoutParams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wf := write("wf.yaml", `schema: verifierd.workflow/v1
name: w
params: {uid: {}}
steps:
  - step: save
    effects:
      - {kind: record_written, match: {owner: {param: uid}}, count_new_only: true}
      - {kind: field_equals, match: {owner: {param: uid}}, field: note, value: x}
`)
	for name, tc := range map[string]struct {
		deployment string
		refused    bool
		says       string
	}{
		"plugin placeholder option": {"effects: {kind: acme, options: {filter: 'owner={uid}'}, settle_s: 1}\n", true, "options holds the placeholder(s) {uid}"},
		"rest path placeholder":     {"effects: {kind: rest, base_url: 'http://x', records_path: '/v/{uid}', path_params: {uid: {param: uid}}, settle_s: 1}\n", true, "path_params binds the run parameter(s) uid"},
		"sql join":                  {"effects: {kind: sql, sqlite_database: x.db, sql_query: 'SELECT v.id FROM v JOIN o ON o.id = v.o', settle_s: 1}\n", true, "joins another table (JOIN)"},
		"sql whole":                 {"effects: {kind: sql, sqlite_database: x.db, sql_query: 'SELECT id, owner FROM v', settle_s: 1}\n", false, ""},
		"plugin declared whole":     {"effects: {kind: acme, options: {filter: 'owner={uid}'}, newness: whole_read, settle_s: 1}\n", false, ""},
		"policy off":                {"policy: {require_proven_newness: false}\neffects: {kind: acme, settle_s: 1}\n", false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, code := runCLI(t, "lint", "--workflow", wf, "--deployment", write(strings.ReplaceAll(name, " ", "-")+".yaml", tc.deployment))
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, out)
			}
			got := decodeLint(t, out)
			var want []lintFinding
			if tc.refused {
				want = []lintFinding{finding(workflow.CodeNewnessUnproven, "save", 0, "steps[0].effects[0]")}
			}
			if diff := cmp.Diff(want, got.Findings, ignoreMessages, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("findings (-want +got):\n%s", diff)
			}
			if tc.refused && (!strings.Contains(got.Findings[0].Message, tc.says) || !strings.Contains(got.Findings[0].Message, "require_proven_newness")) {
				t.Errorf("message %q does not say %q and name the policy", got.Findings[0].Message, tc.says)
			}
		})
	}
	w, err := workflow.Load(wf)
	if err != nil {
		t.Fatal(err)
	}
	unreachable := &verifierv1.TestConnectionResponse{Candidates: []*verifierv1.CandidateConnection{
		{CandidateIndex: 0, Kind: "acme", Tier: 1, Message: "missing run parameter \"uid\"", Newness: "newly_matching", Narrowing: []string{"options holds the placeholder(s) {uid}, which bind run parameters"}},
		{CandidateIndex: 1, Kind: "rest", Tier: 1, Message: "missing run parameter \"uid\"", Newness: "newly_matching", Narrowing: []string{"rest reads over HTTP, whose filters the daemon cannot see"}},
	}}
	oracle, got := tierFindings(w, "d", unreachable)
	if oracle.Reachable || len(got) != 1 || got[0].Code != workflow.CodeNewnessUnproven || got[0].Path != "steps[0].effects[0]" ||
		!strings.Contains(got[0].Message, "0 (acme)") || !strings.Contains(got[0].Message, "candidates 1 (rest) would be refused too") {
		t.Errorf("no reachable candidate: oracle %+v findings %+v, want one newness_unproven naming both candidates", oracle, got)
	}
}

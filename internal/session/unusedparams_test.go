package session

import (
	"context"
	"slices"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// TestBeginReportsUnusedParams: a Begin naming a run parameter that no
// contract and no candidate of the step references answers it under
// UnusedParams (sorted), keeps it with the session, and is begun all the
// same; a parameter referenced by a contract, by a candidate's
// option_params or by a placeholder of a candidate's text is used; a
// secret parameter counts as used only where it is referenced.
func TestBeginReportsUnusedParams(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "unused-test", tier: 1, table: tab})
	// Read-backs only, so that no newness rule of a change claim bears on
	// the reads these deployments bind to run parameters.
	noClaim := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireChangeClaim: &noClaim})
	dep := []byte("effects:\n  kind: unused-test\n  options: {open: 'https://app.example/{tenant}/records'}\n  option_params: {region: {param: region}}\n")
	m.daemon.Deployments = map[string]string{
		"mem": writeDeployment(t, string(dep)),
		// The workflow's secret parameter pin, referenced by the candidate.
		"mem-pin": writeDeployment(t, "effects:\n  kind: unused-test\n  option_params: {pin: {param: pin}}\n"),
	}
	w, err := workflow.Parse([]byte(`schema: verifierd.workflow/v1
name: readback
params: {p: {}, note: {}, pin: {secret: true}}
policy: {subject_params: [p]}
steps:
  - step: check
    effects:
      - {kind: field_equals, match: {p: {param: p}}, field: note, value: {param: note}, timeout_s: 0.2}
`))
	if err != nil {
		t.Fatal(err)
	}
	m.workflows = map[string]*workflow.Workflow{"readback": w}
	const effects = `[{"kind": "field_equals", "match": {"p": {"param": "p"}}, "field": "note", "value": "n", "timeout_s": 0.2}]`
	ctx := context.Background()

	for name, tc := range map[string]struct {
		req  BeginRequest
		want []string
	}{
		"every parameter used": {
			BeginRequest{Deployment: dep, Effects: []byte(effects), Params: map[string]string{"p": "1", "region": "eu", "tenant": "t1"}},
			nil,
		},
		"misspelt and extra names, sorted": {
			BeginRequest{Deployment: dep, Effects: []byte(effects), Params: map[string]string{"p": "1", "region": "eu", "tennant": "t1", "age": "36"}},
			[]string{"age", "tennant"},
		},
		"a registered step: the secret pin is referenced by nothing": {
			BeginRequest{DeploymentName: "mem", Workflow: "readback", Step: "check", Params: map[string]string{"p": "1", "note": "n", "pin": "0000", "region": "eu"}},
			[]string{"pin"},
		},
		"a registered step: the secret pin referenced by the candidate is used": {
			BeginRequest{DeploymentName: "mem-pin", Workflow: "readback", Step: "check", Params: map[string]string{"p": "1", "note": "n", "pin": "0000"}},
			nil,
		},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := m.Begin(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.UnusedParams, tc.want) {
				t.Fatalf("unused_params = %q, want %q", res.UnusedParams, tc.want)
			}
			st, err := m.Get(ctx, res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(st.Begin.UnusedParams, tc.want) {
				t.Errorf("stored session: unused_params = %q, want %q", st.Begin.UnusedParams, tc.want)
			}
		})
	}
}

// TestParamRefs: where a reference to a run parameter is found in a
// contract (a {param} map anywhere, a {template} placeholder, not a
// placeholder of plain text) and in a deployment section (also every
// placeholder of its text, and a compensator).
func TestParamRefs(t *testing.T) {
	t.Parallel()
	effects := []byte(`[
  {"kind": "record_written", "match": {"a": {"param": "in_match"}, "ref": {"template": "Patient/{in_template}"}, "literal": "{not_a_ref}"}},
  {"kind": "field_equals", "match": {"k": {"param": "in_match"}}, "field": "f", "value": {"param": "in_value", "as": "decimal"}},
  {"kind": "exact_new_set", "new_records": [{"x": {"param": "in_set"}}]}
]`)
	dep, err := config.ParseDeployment([]byte(`effects:
  candidates:
    - kind: sql
      sqlite_database: /tmp/x.db
      sql_query: SELECT id FROM t WHERE a = :a
      sql_query_params: {a: {param: in_sql}}
    - kind: rest
      base_url: http://127.0.0.1:1
      path: /api/{in_path}/items
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := judge.DecodeDocument(effects); err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, n := range []string{"in_match", "in_template", "not_a_ref", "in_value", "in_set", "in_sql", "in_path", "nowhere"} {
		params[n] = "v"
	}
	if got, want := unusedParams(params, dep, effects), []string{"not_a_ref", "nowhere"}; !slices.Equal(got, want) {
		t.Fatalf("unused = %q, want %q", got, want)
	}
	if got := unusedParams(nil, dep, effects); got != nil {
		t.Errorf("no parameters: unused = %q, want none", got)
	}
}

package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCensusRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, path, says string
	}{
		{"census param in query params", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e WHERE p = :p', sql_query_params: {p: {param: patient}}}}\n", "effects.census.sql_query_params", "binds no run parameter"},
		{"census placeholder in sql", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e WHERE p = :patient'}}\n", "effects.census.sql_query", ":patient"},
		{"census path param", "effects: {kind: rest, base_url: 'http://x', records_path: '/a/{p}', path_params: {p: {param: p}}, census: {records_path: '/a/{p}'}}\n", "effects.census.records_path", "{p}"},
		{"census param value", "effects: {kind: graphql, base_url: 'http://x', graphql_query: 'q', census: {graphql_query: 'q', graphql_variables: {a: {param: applicant}}}}\n", "effects.census.graphql_variables.a", "applicant"},
		{"census search exprs", "effects: {kind: fhir, base_url: 'http://x', resource_type: Observation, census: {resource_type: Observation, search_param_exprs: {subject: {param: p}}}}\n", "effects.census.search_param_exprs", "binds no run parameter"},
		{"census option params", "effects: {kind: acme, census: {option_params: {a: {param: p}}}}\n", "effects.census.option_params", "binds no run parameter"},
		{"census read key misspelt", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_querry: 'SELECT id FROM e'}}\n", "effects.census.sql_querry", `did you mean "sql_query"?`},
		{"census connection key", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e', sqlite_database: /x}}\n", "effects.census.sqlite_database", "inherits"},
		{"census without its read", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {}}\n", "effects.census.sql_query", "missing"},
		{"census not a map", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: 'SELECT id FROM e'}\n", "effects.census", "must be a map"},
		{"census on a kind without a collection", "effects: {kind: document, census: {path: /x}}\n", "effects.census", "does not read a collection"},
		{"census and newness", "effects: {kind: sql, sql_query: 'SELECT id FROM e', newness: whole_read, census: {sql_query: 'SELECT id FROM e'}}\n", "effects.newness", "remove newness"},
		{"bad newness", "effects: {kind: sql, sql_query: 'SELECT id FROM e', newness: maybe}\n", "effects.newness", "census:"},
		{"census in a list", "effects: {candidates: [{kind: sql, sql_query: 'SELECT id FROM e'}, {kind: sql, census: {sql_query: 'SELECT id FROM e WHERE x = %(p)s'}}]}\n", "effects.candidates[1].census.sql_query", "%(p)s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDeployment([]byte(tt.doc))
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if ce.Path != tt.path || !strings.Contains(ce.Message, tt.says) {
				t.Errorf("refused at %q: %q; want %q saying %q", ce.Path, ce.Message, tt.path, tt.says)
			}
		})
	}
}

func TestCensusDerived(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`effects:
  kind: sql
  sql_driver: postgres
  sql_dsn_env: DB_DSN
  sql_query: "SELECT id, patient_id FROM encounters WHERE patient_id = :p"
  sql_query_params: {p: {param: patient}}
  census:
    sql_query: "SELECT id FROM encounters"
`))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Candidates[0]
	if c.Census == nil {
		t.Fatal("no census")
	}
	want := map[string]any{"kind": "sql", "sql_driver": "postgres", "sql_dsn_env": "DB_DSN", "sql_query": "SELECT id FROM encounters"}
	if diff := cmp.Diff(want, c.Census.Section); diff != "" {
		t.Errorf("census section (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(c.Secrets, c.Census.Secrets); diff != "" || c.Census.Secrets["sql_dsn_env"] != "DB_DSN" {
		t.Errorf("census secrets %v, want the candidate's %v", c.Census.Secrets, c.Secrets)
	}
	if _, ok := c.Census.Section["census"]; ok {
		t.Error("the census section carries census:")
	}
	if got := c.Census.Narrowing(); len(got) != 0 {
		t.Errorf("census narrowing %v, want none", got)
	}
	if c.NewnessOf() != NewnessCensus || c.CollateralScope() != ScopeCollection {
		t.Errorf("newness %q scope %q, want census collection", c.NewnessOf(), c.CollateralScope())
	}
	cfg, _, err := c.Census.Resolve(nil, func(string) (string, bool) { return "x-long-dsn", true }, nil)
	if err != nil || !strings.Contains(string(cfg), `"sql_query":"SELECT id FROM encounters"`) || strings.Contains(string(cfg), "sql_query_params") {
		t.Errorf("census config %s, %v", cfg, err)
	}
}

func TestCensusPluginInheritsSecrets(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`effects:
  kind: acme
  options: {table: visits, subject_filter: on}
  option_params: {patient: {param: patient}}
  secret_env: {password: ACME_PW}
  census:
    options: {table: visits}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Candidates[0]
	if got := c.Census.Section["options"]; !cmp.Equal(got, map[string]any{"table": "visits"}) {
		t.Errorf("census options %v", got)
	}
	if c.Census.Secrets["secret_env.password"] != "ACME_PW" || c.Census.OptionParams != nil {
		t.Errorf("census secrets %v option params %v", c.Census.Secrets, c.Census.OptionParams)
	}
	if got := c.Narrowing(); !slices.Equal(got, []string{"option_params binds the run parameter(s) patient"}) {
		t.Errorf("narrowing %q", got)
	}
}

func TestNarrowing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		want      []string
		newness   string
	}{
		{"whole sql", "effects: {kind: sql, sql_query: 'SELECT id, \"where\" FROM e'}\n", nil, NewnessWholeRead},
		{"sql where in a literal", "effects: {kind: sql, sql_query: \"SELECT id, 'where' AS w FROM e\"}\n", nil, NewnessWholeRead},
		{"sql where", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE status = 1'}\n", []string{"sql_query filters with WHERE"}, NewnessNewlyMatching},
		{"sql subquery having", "effects: {kind: sql, sql_query: 'SELECT id FROM (SELECT id FROM e GROUP BY id HAVING count(*) > 1) x'}\n", []string{"sql_query filters with HAVING"}, NewnessNewlyMatching},
		{"sql bound", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE p = :p', sql_query_params: {p: {param: patient}}}\n",
			[]string{"sql_query_params binds the run parameter(s) patient", "sql_query filters with WHERE"}, NewnessNewlyMatching},
		{"sql declared whole", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE deleted = 0', newness: whole_read}\n", []string{"sql_query filters with WHERE"}, NewnessWholeRead},
		{"rest", "effects: {kind: rest, base_url: 'http://x', records_path: /a}\n", []string{"rest reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"graphql bound", "effects: {kind: graphql, base_url: 'http://x', graphql_query: q, graphql_variables: {a: {param: applicant}}}\n",
			[]string{"graphql_variables binds the run parameter(s) applicant", "graphql reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"fhir shaping only", "effects: {kind: fhir, base_url: 'http://x', resource_type: Observation, search_params: {_count: '100', _sort: date}}\n", nil, NewnessWholeRead},
		{"fhir filter", "effects: {kind: fhir, base_url: 'http://x', resource_type: Observation, search_params: {status: final, _count: '10'}, search_param_exprs: {subject: {param: p}}}\n",
			[]string{"search_param_exprs binds the run parameter(s) p", "search_params filters on status"}, NewnessNewlyMatching},
		{"onscreen re-opens one record", "effects: {kind: onscreen, onscreen: {renavigate: [{open: 'http://x/records/{ref}'}]}}\n",
			[]string{"onscreen holds the placeholder(s) {ref}"}, NewnessNewlyMatching},
		{"ui_readback page", "effects: {kind: ui_readback, ui_readback: {record_url: 'http://x/p/{patient}', url_params: {patient: {param: patient_id}}}}\n",
			[]string{"ui_readback binds the run parameter(s) patient_id", "ui_readback holds the placeholder(s) {patient}"}, NewnessNewlyMatching},
		{"document folder", "effects: {kind: document, root: /srv/x, file_pattern: 'r-*.json'}\n", nil, NewnessWholeRead},
		{"declared newly matching", "effects: {kind: rest, base_url: 'http://x', records_path: /a, newness: newly_matching}\n", []string{"rest reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDeployment([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			c := d.Candidates[0]
			if got := c.Narrowing(); !slices.Equal(got, tt.want) {
				t.Errorf("narrowing %q, want %q", got, tt.want)
			}
			if got := c.NewnessOf(); got != tt.newness {
				t.Errorf("newness %q, want %q", got, tt.newness)
			}
			wantScope := ScopeSubject
			if tt.newness == NewnessWholeRead {
				wantScope = ScopeCollection
			}
			if got := c.CollateralScope(); got != wantScope {
				t.Errorf("scope %q, want %q", got, wantScope)
			}
		})
	}
}

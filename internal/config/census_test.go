package config

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
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
		{"census with a where", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e WHERE deleted_at IS NULL'}}\n", "effects.census", "census_scope: declared"},
		{"census with an inner join", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT e.id FROM e JOIN f ON f.id = e.f'}}\n", "effects.census", "SELECT of the collection's table"},
		{"rest census undeclared", "effects: {kind: rest, base_url: 'http://x', records_path: /a, census: {records_path: /a}}\n", "effects.census", "never proven whole"},
		{"plugin census undeclared", "effects: {kind: acme, census: {options: {}}}\n", "effects.census", "census_scope: declared"},
		{"bad census scope", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e', census_scope: proven}}\n", "effects.census.census_scope", "must be declared"},
		{"census scope misspelt", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {sql_query: 'SELECT id FROM e', census_scop: declared}}\n", "effects.census.census_scop", `did you mean "census_scope"?`},
		{"declared census still binds no param", "effects: {kind: sql, sql_query: 'SELECT id FROM e', census: {census_scope: declared, sql_query: 'SELECT id FROM e WHERE p = $1'}}\n", "effects.census.sql_query", "$1"},
		{"plugin census inherits a placeholder", "effects: {kind: acme, options: {table: visits, owner: '{uid}'}, census: {census_scope: declared}}\n", "effects.census.options.owner", "inherits from the candidate's options.owner the placeholder(s) {uid}"},
		{"plugin census own placeholder", "effects: {kind: acme, options: {table: visits}, census: {census_scope: declared, options: {owner: 'x-{uid}'}}}\n", "effects.census.options.owner", "has the placeholder(s) {uid}"},
		{"plugin census options not a map", "effects: {kind: acme, census: {census_scope: declared, options: x}}\n", "effects.census.options", "must be a map"},
		{"census in a list", "effects: {candidates: [{kind: sql, sql_query: 'SELECT id FROM e'}, {kind: sql, census: {sql_query: 'SELECT id FROM e WHERE x = %(p)s'}}]}\n", "effects.candidates[1].census.sql_query", "%(p)s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDeployment([]byte(tt.doc))
			ce, ok := errors.AsType[*refusal.Error](err)
			if !ok {
				t.Fatalf("err = %v, want *refusal.Error", err)
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
	if c.NewnessOf() != NewnessCensus || c.CollateralScope() != ScopeCollection || c.CensusScope != CensusScopeProven {
		t.Errorf("newness %q scope %q census scope %q, want census collection proven", c.NewnessOf(), c.CollateralScope(), c.CensusScope)
	}
	cfg, _, err := c.Census.Resolve(nil, func(string) (string, bool) { return "x-long-dsn", true }, nil)
	if err != nil || !strings.Contains(string(cfg), `"sql_query":"SELECT id FROM encounters"`) || strings.Contains(string(cfg), "sql_query_params") {
		t.Errorf("census config %s, %v", cfg, err)
	}
}

// TestCensusPluginInheritsOptions: a plugin census inherits the
// candidate's options (its connection, its table) and secrets, with its
// own options merged over them; null drops an inherited option (the
// subject filter) and option_params are never inherited.
func TestCensusPluginInheritsOptions(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`effects:
  kind: acme
  options: {host: acme.internal, table: visits, subject_filter: "{patient}"}
  option_params: {patient: {param: patient}}
  secret_env: {password: ACME_PW}
  census:
    census_scope: declared
    options: {subject_filter: null, page_size: 500}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Candidates[0]
	if got := c.Census.Section["options"]; !cmp.Equal(got, map[string]any{"host": "acme.internal", "table": "visits", "page_size": json.Number("500")}) {
		t.Errorf("census options %v", got)
	}
	if c.Census.Secrets["secret_env.password"] != "ACME_PW" || c.Census.OptionParams != nil {
		t.Errorf("census secrets %v option params %v", c.Census.Secrets, c.Census.OptionParams)
	}
	if c.CensusScope != CensusScopeDeclared || c.NewnessOf() != NewnessCensus || c.CollateralScope() != ScopeCollection {
		t.Errorf("census scope %q newness %q scope %q, want declared census collection", c.CensusScope, c.NewnessOf(), c.CollateralScope())
	}
	want := []string{"option_params binds the run parameter(s) patient", "options holds the placeholder(s) {patient}, which bind run parameters", "the plugin kind acme reads through its own adapter, whose filters the daemon cannot see"}
	if got := c.Narrowing(); !slices.Equal(got, want) {
		t.Errorf("narrowing %q, want %q", got, want)
	}
}

// TestCensusLiteralFilters: a census may carry its kind's literal read
// keys (fhir search_params, a literal rest query) once declared; only a
// run parameter is refused.
func TestCensusLiteralFilters(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`effects:
  candidates:
    - kind: fhir
      base_url: http://fhir.test
      resource_type: Observation
      search_param_exprs: {subject: {template: "Patient/{patient}"}}
      census:
        census_scope: declared
        resource_type: Observation
        search_params: {_count: "100", status: final}
    - kind: rest
      base_url: http://rest.test
      records_path: /api/visits?owner={o}
      path_params: {o: {param: owner}}
      census: {census_scope: declared, records_path: "/api/visits?deleted=0"}
`))
	if err != nil {
		t.Fatal(err)
	}
	fc := d.Candidates[0].Census
	if !cmp.Equal(fc.Section["search_params"], map[string]any{"_count": "100", "status": "final"}) || fc.Section["search_param_exprs"] != nil {
		t.Errorf("fhir census section %v", fc.Section)
	}
	if got := d.Candidates[1].Census.Section["records_path"]; got != "/api/visits?deleted=0" || d.Candidates[1].Census.Section["path_params"] != nil {
		t.Errorf("rest census section %v", d.Candidates[1].Census.Section)
	}
	for i, c := range d.Candidates {
		if c.CensusScope != CensusScopeDeclared {
			t.Errorf("candidate %d census scope %q, want declared", i, c.CensusScope)
		}
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
		{"sql where in a comment", "effects: {kind: sql, sql_query: \"SELECT id FROM e -- WHERE x = 1\"}\n", nil, NewnessWholeRead},
		{"sql where", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE status = 1'}\n", []string{"sql_query filters with WHERE"}, NewnessNewlyMatching},
		{"sql inner join without where", "effects: {kind: sql, sql_query: 'SELECT e.id FROM e JOIN p ON p.id = e.p'}\n", []string{"sql_query joins another table (JOIN)"}, NewnessNewlyMatching},
		{"sql subquery", "effects: {kind: sql, sql_query: 'SELECT id FROM (SELECT id FROM e GROUP BY id HAVING count(*) > 1) x'}\n", []string{"sql_query reads a subquery, a function or an expression"}, NewnessNewlyMatching},
		{"sql bound", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE p = :p', sql_query_params: {p: {param: patient}}}\n",
			[]string{"sql_query_params binds the run parameter(s) patient", "sql_query filters with WHERE"}, NewnessNewlyMatching},
		{"sql literal params", "effects: {kind: sql, sql_query: 'SELECT id FROM e ORDER BY $1', sql_query_params: {a: x}}\n",
			[]string{"sql_query_params binds values into sql_query", "sql_query binds a parameter ($n)"}, NewnessNewlyMatching},
		{"sql declared whole", "effects: {kind: sql, sql_query: 'SELECT id FROM e WHERE deleted = 0', newness: whole_read}\n", []string{"sql_query filters with WHERE"}, NewnessWholeReadDeclared},
		{"rest", "effects: {kind: rest, base_url: 'http://x', records_path: /a}\n", []string{"rest reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"rest declared whole", "effects: {kind: rest, base_url: 'http://x', records_path: /a, newness: whole_read}\n", []string{"rest reads over HTTP, whose filters the daemon cannot see"}, NewnessWholeReadDeclared},
		{"graphql bound", "effects: {kind: graphql, base_url: 'http://x', graphql_query: q, graphql_variables: {a: {param: applicant}}}\n",
			[]string{"graphql_variables binds the run parameter(s) applicant", "graphql reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"fhir shaping only", "effects: {kind: fhir, base_url: 'http://x', resource_type: Observation, search_params: {_count: '100', _sort: date}}\n", []string{"fhir reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"fhir filter", "effects: {kind: fhir, base_url: 'http://x', resource_type: Observation, search_params: {status: final, _count: '10'}, search_param_exprs: {subject: {param: p}}}\n",
			[]string{"search_param_exprs binds the run parameter(s) p", "fhir reads over HTTP, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"plugin", "effects: {kind: acme, options: {table: visits}}\n", []string{"the plugin kind acme reads through its own adapter, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"plugin placeholder option", "effects: {kind: acme, options: {filter: {owner: '{uid}'}}}\n",
			[]string{"options holds the placeholder(s) {uid}, which bind run parameters", "the plugin kind acme reads through its own adapter, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"plugin literal option param placeholder", "effects: {kind: acme, option_params: {filter: 'owner={uid}'}}\n",
			[]string{"option_params binds the run parameter(s) uid", "the plugin kind acme reads through its own adapter, whose filters the daemon cannot see"}, NewnessNewlyMatching},
		{"plugin declared whole", "effects: {kind: acme, options: {table: visits}, newness: whole_read}\n", []string{"the plugin kind acme reads through its own adapter, whose filters the daemon cannot see"}, NewnessWholeReadDeclared},
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
			if tt.newness == NewnessWholeRead || tt.newness == NewnessWholeReadDeclared {
				wantScope = ScopeCollection
			}
			if got := c.CollateralScope(); got != wantScope {
				t.Errorf("scope %q, want %q", got, wantScope)
			}
		})
	}
}

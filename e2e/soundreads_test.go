package e2e

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// Sound reads through the real daemon: the faults under which a read that
// was narrowed to the run's subject, cut at a server's page, settled too
// early or compared as text answered VERIFIED, each against the Loans
// system of record (one SQLite database, or a PostgreSQL table, behind a
// REST and a GraphQL API), through the sql, rest and graphql adapters. Every fault must end not
// VERIFIED under the rules that close it (census, completeness, proven
// newness, the settle floor, typed comparison), and its honest counterpart
// VERIFIED. Control rows show that the fault is real: with the rule
// relaxed in the way the operator may relax it, the fault passes.

// soundKinds are the adapters every fault is read through.
var soundKinds = []string{"sql", "rest", "graphql"}

// The registered workflows the cases name. loans carries the change claim
// alone; loans_amount adds the read-back of the amount, as a decimal and
// (the control) as text; loans_settled is loans under a settle floor.
const (
	loansWorkflow = `schema: verifierd.workflow/v1
name: loans
params: {applicant: {}, product: {}}
steps:
  - step: submit
    risk: irreversible
    effects:
      - {kind: record_written, match: {applicant: {param: applicant}, product: {param: product}}, count_new_only: true, risk: irreversible, timeout_s: 0.5}
`
	loansAmountWorkflow = `schema: verifierd.workflow/v1
name: loans_amount
params: {applicant: {}, product: {}, amount: {}}
steps:
  - step: submit
    risk: irreversible
    effects:
      - {kind: record_written, match: {applicant: {param: applicant}, product: {param: product}}, count_new_only: true, risk: irreversible, timeout_s: 0.5}
      - {kind: field_equals, match: {applicant: {param: applicant}, product: {param: product}}, field: amount, value: {param: amount, as: decimal}, risk: irreversible, timeout_s: 0.5}
  - step: submit_text
    risk: irreversible
    effects:
      - {kind: record_written, match: {applicant: {param: applicant}, product: {param: product}}, count_new_only: true, risk: irreversible, timeout_s: 0.5}
      - {kind: field_equals, match: {applicant: {param: applicant}, product: {param: product}}, field: amount, value: {param: amount}, risk: irreversible, timeout_s: 0.5}
`
	loansSettledWorkflow = `schema: verifierd.workflow/v1
name: loans_settled
params: {applicant: {}, product: {}}
policy: {min_settle_s: 2}
steps:
  - step: submit
    risk: irreversible
    effects:
      - {kind: record_written, match: {applicant: {param: applicant}, product: {param: product}}, count_new_only: true, risk: irreversible, timeout_s: 0.5}
`
)

// soundFixture is one Loans server and one daemon with the named
// workflows registered.
type soundFixture struct {
	loans *httprecords.Loans
	d     *daemon
	dir   string
	deps  map[string]string // "<kind>/<variant>" -> deployment file
	// sqlSource is how an sql candidate reaches the store (the keys after
	// kind: sql, before sql_query).
	sqlSource string
}

// newSoundFixture serves the Loans store from an SQLite file.
func newSoundFixture(t *testing.T, workflows ...string) *soundFixture {
	t.Helper()
	l := httprecords.NewLoans(t, true)
	return startSoundFixture(t, l, "  sqlite_database: "+l.DBPath+"\n", nil, workflows...)
}

// newSoundFixturePostgres serves the Loans store from a table of a real
// PostgreSQL; the sql adapter reads it as the reader account.
func newSoundFixturePostgres(t *testing.T, pg *sqlservers.Postgres, workflows ...string) *soundFixture {
	t.Helper()
	l := httprecords.NewLoansPostgres(t, true, pg)
	source := fmt.Sprintf("  sql_driver: postgres\n  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}\n  sql_password_env: LOANS_DB_PASSWORD\n",
		pg.Port, pg.Reader.User, pg.Database)
	return startSoundFixture(t, l, source, []string{"LOANS_DB_PASSWORD=" + pg.Reader.Password}, workflows...)
}

func startSoundFixture(t *testing.T, l *httprecords.Loans, sqlSource string, env []string, workflows ...string) *soundFixture {
	t.Helper()
	f := &soundFixture{loans: l, dir: t.TempDir(), deps: map[string]string{}, sqlSource: sqlSource}
	cfg := "secrets:\n  allow: [LOANS_*]\nworkflows:\n"
	for _, wf := range workflows {
		name := strings.TrimPrefix(strings.Split(wf, "\n")[1], "name: ")
		cfg += fmt.Sprintf("  %s: %s\n", name, writeFile(t, f.dir, name+".yaml", wf))
	}
	f.d = startDaemon(t, daemonOpts{config: cfg, env: append([]string{"LOANS_TOKEN=" + f.loans.Token}, env...)})
	return f
}

// dep writes (once) and returns the deployment file of kind's variant.
func (f *soundFixture) dep(t *testing.T, kind, variant string) string {
	t.Helper()
	key := kind + "/" + variant
	if p, ok := f.deps[key]; ok {
		return p
	}
	body, ok := soundDeployments(f.loans, f.sqlSource)[key]
	if !ok {
		t.Fatalf("no deployment %s", key)
	}
	p := writeFile(t, f.dir, strings.ReplaceAll(key, "/", "-")+".yaml", body)
	f.deps[key] = p
	return p
}

// soundDeployments are the deployments of the cases, by "<kind>/<variant>":
//
//	census     the read narrowed to the run's applicant, with a census of
//	           the whole collection (the sound way to read a subject)
//	naive      the same read without census or newness (refused at Begin)
//	matching   the same read declaring newness: newly_matching (control)
//	whole_*    the whole collection, with each way (or none) of stating how
//	           the read is complete
func soundDeployments(l *httprecords.Loans, sqlSource string) map[string]string {
	sqlRead := func(query, extra string) string {
		return fmt.Sprintf("effects:\n  kind: sql\n%s  sql_query: %s\n%s", sqlSource, query, extra)
	}
	const sqlSubject = "SELECT id, applicant, product, amount FROM applications WHERE applicant = :applicant ORDER BY id"
	const sqlParams = "  sql_query_params: {applicant: {param: applicant}}\n"

	restRead := func(path, extra string) string {
		return fmt.Sprintf("effects:\n  kind: rest\n  base_url: %s\n  records_path: %s\n  records_key: data\n  auth: {bearer_env: LOANS_TOKEN}\n  ca_file: %s\n%s", l.URL, path, l.CAFile, extra)
	}
	const restPaged = "  pagination: {offset_param: offset, limit_param: limit, page_size: 40}\n"
	const restSubject = "/api/applications?applicant={applicant}"
	const restParams = "  path_params: {applicant: {param: applicant}}\n" + restPaged

	gqlRead := func(query, path, extra string) string {
		return fmt.Sprintf("effects:\n  kind: graphql\n  base_url: %s\n  graphql_query: '%s'\n  graphql_records_path: %s\n  auth: {bearer_env: LOANS_TOKEN}\n  ca_file: %s\n%s", l.GraphQLURL, query, path, l.CAFile, extra)
	}
	const gqlFields = "id applicant product amount"
	const gqlSubject = "query Apps($applicant: String!, $limit: Int, $offset: Int) { applications(applicant: $applicant, limit: $limit, offset: $offset) { " + gqlFields + " } }"
	const gqlPaged = "  pagination: {limit_variable: limit, offset_variable: offset, page_size: 40}\n"
	const gqlParams = "  graphql_variables: {applicant: {param: applicant}}\n" + gqlPaged
	const gqlAll = "query All($limit: Int, $offset: Int) { applications(limit: $limit, offset: $offset) { " + gqlFields + " } }"
	const gqlUnpaged = "query All { applications { " + gqlFields + " } }"

	return map[string]string{
		"sql/census":   sqlRead(sqlSubject, sqlParams+"  census: {sql_query: SELECT id FROM applications}\n"),
		"sql/naive":    sqlRead(sqlSubject, sqlParams),
		"sql/matching": sqlRead(sqlSubject, sqlParams+"  newness: newly_matching\n"),
		// Not narrowed: no parameter, no WHERE; its newness needs no census.
		"sql/whole": sqlRead("SELECT id, applicant, product, amount FROM applications ORDER BY id", ""),
		// The same read capped by its own LIMIT: narrowed (so refused at
		// Begin), and lint's capped_read.
		"sql/whole_capped": sqlRead("SELECT id, applicant, product, amount FROM applications ORDER BY id LIMIT 100", ""),

		"rest/census": restRead(restSubject, restParams+"  census:\n    census_scope: declared\n    records_path: /api/applications\n    records_key: data\n"+
			"    pagination: {offset_param: offset, limit_param: limit, page_size: 40}\n"),
		"rest/naive":    restRead(restSubject, restParams),
		"rest/matching": restRead(restSubject, restParams+"  newness: newly_matching\n"),
		// The whole collection; the server answers 100 records unless asked.
		"rest/whole_unstated":  restRead("/api/applications", "  newness: whole_read\n"),
		"rest/whole_asserted":  restRead("/api/applications", "  newness: whole_read\n  single_response: true\n"),
		"rest/whole_max":       restRead("/api/applications", "  newness: whole_read\n  single_response: true\n  max_records: 100\n"),
		"rest/whole_total":     restRead("/api/applications", "  newness: whole_read\n  single_response: true\n  total_path: total\n"),
		"rest/whole_header":    restRead("/api/applications", "  newness: whole_read\n  single_response: true\n  total_header: X-Total-Count\n"),
		"rest/whole_asked":     restRead("/api/applications?limit=1000", "  newness: whole_read\n  single_response: true\n  max_records: 1000\n  total_path: total\n"),
		"rest/whole_paginated": restRead("/api/applications", "  newness: whole_read\n"+restPaged+"  total_header: X-Total-Count\n"),

		"graphql/census": gqlRead(gqlSubject, "applications", gqlParams+"  census:\n    census_scope: declared\n    graphql_query: '"+
			"query Ids($limit: Int, $offset: Int) { applications(limit: $limit, offset: $offset) { id } }'\n    graphql_records_path: applications\n"+
			"    pagination: {limit_variable: limit, offset_variable: offset, page_size: 40}\n"),
		"graphql/naive":    gqlRead(gqlSubject, "applications", gqlParams),
		"graphql/matching": gqlRead(gqlSubject, "applications", gqlParams+"  newness: newly_matching\n"),
		// A query without a limit argument gets the server's page of 100.
		"graphql/whole_unstated": gqlRead(gqlUnpaged, "applications", "  newness: whole_read\n"),
		"graphql/whole_asserted": gqlRead(gqlUnpaged, "applications", "  newness: whole_read\n  single_response: true\n"),
		"graphql/whole_max":      gqlRead(gqlUnpaged, "applications", "  newness: whole_read\n  single_response: true\n  max_records: 100\n"),
		"graphql/whole_total": gqlRead("query All { applications { "+gqlFields+" } applicationsCount }", "applications",
			"  newness: whole_read\n  single_response: true\n  total_path: applicationsCount\n"),
		"graphql/whole_asked": gqlRead("query All { applications(limit: 1000) { "+gqlFields+" } applicationsCount }", "applications",
			"  newness: whole_read\n  single_response: true\n  max_records: 1000\n  total_path: applicationsCount\n"),
		"graphql/whole_paginated": gqlRead(gqlAll, "applications", "  newness: whole_read\n"+gqlPaged),
		"graphql/whole_cursor": gqlRead("query Page($after: String) { applicationsPage(first: 40, after: $after) { nodes { "+gqlFields+" } pageInfo { hasNextPage endCursor } totalCount } }",
			"applicationsPage.nodes", "  newness: whole_read\n  pagination: {after_variable: after, page_info_path: applicationsPage.pageInfo}\n  total_path: applicationsPage.totalCount\n"),
	}
}

// soundCase is one row of a fault table.
type soundCase struct {
	name     string
	variant  string // the deployment variant (soundDeployments)
	workflow string // registered workflow; its step is step, or "submit"
	step     string
	amount   string // the amount parameter, when the step reads it back
	// seed runs before Begin; it returns what act needs (an id, or 0).
	seed func(t *testing.T, f *soundFixture, subject string) int64
	act  func(t *testing.T, f *soundFixture, kind, subject string, seeded int64)

	// want is the Verify summary (outcome, then verdict/class/codes per
	// effect, codes sorted); refused, when set, is Begin's exit code
	// instead, and mentions what its message must name.
	want     string
	refused  int
	mentions []string
	// newness and scope are what Verify must record for the change claim
	// (effect 0), when set.
	newness, scope string
	// atLeast is how long Verify must have read (the settle floor).
	atLeast time.Duration
}

// runSound runs the cases through each kind.
func runSound(t *testing.T, f *soundFixture, kinds []string, cases []soundCase) {
	t.Helper()
	for _, kind := range kinds {
		for i, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				subject := fmt.Sprintf("%s-%d-%d", kind, i, time.Now().UnixNano()%1e6)
				var seeded int64
				if tc.seed != nil {
					seeded = tc.seed(t, f, subject)
				}
				wf, step := tc.workflow, tc.step
				if wf == "" {
					wf = "loans"
				}
				if step == "" {
					step = "submit"
				}
				args := []string{"begin", "--deployment-name", f.d.register(t, f.dep(t, kind, tc.variant)),
					"--workflow", wf, "--step", step, "--param", "applicant=" + subject, "--param", "product=car"}
				if tc.amount != "" {
					args = append(args, "--param", "amount="+tc.amount)
				}
				out, stderr, code := f.d.ctlAll(t, args...)
				if tc.refused != 0 {
					r := mustJSON[refusal](t, out)
					if code != tc.refused || r.Error == nil {
						t.Fatalf("begin: exit %d, %s%s; want a refusal, exit %d", code, out, stderr, tc.refused)
					}
					for _, m := range tc.mentions {
						if !strings.Contains(r.Error.Message, m) {
							t.Errorf("the refusal does not name %q: %s", m, r.Error.Message)
						}
					}
					return
				}
				if code != 0 {
					t.Fatalf("begin exit %d: %s%s\ndaemon log:\n%s", code, out, stderr, f.d.logs())
				}
				begun := mustJSON[beginOutput](t, out)
				if len(begun.Effects) == 0 || begun.Effects[0].Candidate != kind || begun.Effects[0].Tier != 1 {
					t.Fatalf("begin effects: %+v", begun.Effects)
				}
				tc.act(t, f, kind, subject, seeded)
				start := time.Now()
				out, code = f.d.ctl(t, "verify", "--session", begun.SessionID)
				took := time.Since(start)
				f.loans.WaitIdle()
				if code != 0 {
					t.Fatalf("verify exit %d: %s\ndaemon log:\n%s", code, out, f.d.logs())
				}
				v := mustJSON[soundVerify](t, out)
				if got := v.summary(); got != tc.want {
					t.Errorf("verify = %s\nwant     %s\n(verify took %v)", got, tc.want, took)
				}
				if e := v.Effects[0]; e.Substrate != kind || e.Tier != 1 {
					t.Errorf("substrate/tier = %s/%d, want %s/1", e.Substrate, e.Tier, kind)
				}
				if tc.newness != "" {
					e := v.Effects[0]
					newness, censusScope := recordedNewness(kind, tc.newness)
					if e.Newness != newness || e.CensusScope != censusScope || e.CollateralScope != tc.scope {
						t.Errorf("newness/census_scope/collateral_scope = %q/%q/%q, want %q/%q/%q", e.Newness, e.CensusScope, e.CollateralScope, newness, censusScope, tc.scope)
					}
				}
				if took < tc.atLeast {
					t.Errorf("verify answered after %v, want at least %v (the settle floor)", took, tc.atLeast)
				}
				// Every non-confirmed effect of the irreversible step
				// carries a reconciliation task.
				for i, e := range v.Effects {
					if hasTask := string(e.ReconciliationTask) != "null" && len(e.ReconciliationTask) > 0; hasTask != (e.Verdict != "CONFIRMED") {
						t.Errorf("effect %d (%s): reconciliation task present = %v", i, e.Verdict, hasTask)
					}
				}
			})
		}
	}
}

// soundVerify is what verifyctl verify prints, with the fields these
// cases assert.
type soundVerify struct {
	Outcome string `json:"outcome"`
	Effects []struct {
		Verdict string `json:"verdict"`
		Result  string `json:"result"`
		Reasons []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"reasons"`
		Tier               int             `json:"tier"`
		Substrate          string          `json:"substrate"`
		Newness            string          `json:"newness"`
		CensusScope        string          `json:"census_scope"`
		CollateralScope    string          `json:"collateral_scope"`
		ReconciliationTask json.RawMessage `json:"reconciliation_task"`
	} `json:"effects"`
}

// recordedNewness is what a result through kind records for a case's
// newness: only a sql read is proven whole (an HTTP read's whole_read is
// the operator's declaration), and only a sql census is proven whole (an
// HTTP census is declared).
func recordedNewness(kind, newness string) (string, string) {
	switch {
	case newness == "whole_read" && kind != "sql":
		return "whole_read_declared", ""
	case newness == "census" && kind == "sql":
		return newness, "proven"
	case newness == "census":
		return newness, "declared"
	}
	return newness, ""
}

// summary is "OUTCOME VERDICT/class/CODE+CODE …", each effect's codes
// sorted (the order of reasons is not what these cases are about).
func (v soundVerify) summary() string {
	parts := []string{v.Outcome}
	for _, e := range v.Effects {
		var codes []string
		for _, r := range e.Reasons {
			codes = append(codes, r.Code)
		}
		slices.Sort(codes)
		parts = append(parts, fmt.Sprintf("%s/%s/%s", e.Verdict, e.Result, strings.Join(codes, "+")))
	}
	return strings.Join(parts, " ")
}

// The automation's writes, through the API of the kind that reads them
// back (GraphQL mutations for graphql, the REST API otherwise: the sql
// adapter reads the database under both).

func submit(times int, amount string) func(*testing.T, *soundFixture, string, string, int64) {
	return func(t *testing.T, f *soundFixture, kind, subject string, _ int64) {
		for range times {
			if kind == "graphql" {
				f.loans.SubmitGraphQL(t, subject, "car", amount)
			} else {
				f.loans.Submit(t, subject, "car", amount)
			}
		}
	}
}

func reassign(t *testing.T, f *soundFixture, kind, subject string, other int64) {
	if kind == "graphql" {
		f.loans.ReassignGraphQL(t, other, subject, "car", "1234.50")
	} else {
		f.loans.Reassign(t, other, subject, "car", "1234.50")
	}
}

func submitAndDelete(t *testing.T, f *soundFixture, kind, subject string, other int64) {
	submit(1, "1234.50")(t, f, kind, subject, 0)
	if kind == "graphql" {
		f.loans.DeleteGraphQL(t, other)
	} else {
		f.loans.Delete(t, other)
	}
}

// anotherApplicant seeds an existing application of another applicant.
func anotherApplicant(t *testing.T, f *soundFixture, subject string) int64 {
	return f.loans.Insert(t, subject+"-other", "car", "500.00")
}

const (
	verified        = "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"
	newnessRefused  = 3 // REJECTED_POLICY: verifyctl exits 3, do not actuate
	configRefused   = 2 // a deployment that does not load: invalid input
	reconcile       = "RECONCILIATION_REQUIRED "
	countOver       = reconcile + "REFUTED/conflicting/COUNT_OVER"
	existingChanged = reconcile + "REFUTED/conflicting/COUNT_UNDER+EXISTING_RECORD_CHANGED"
)

// TestSoundReadsReassigned (a): the automation overwrote another
// applicant's existing application with this applicant's data (an UPDATE,
// no new row). A read narrowed to the applicant sees a record that newly
// matches; only the census, read before and after, knows it existed.
func TestSoundReadsReassigned(t *testing.T) {
	f := newSoundFixture(t, loansWorkflow)
	runSound(t, f, soundKinds, reassignedCases())
}

func reassignedCases() []soundCase {
	return []soundCase{
		{name: "re-assigned -> conflicting", variant: "census", seed: anotherApplicant, act: reassign,
			want: existingChanged, newness: "census", scope: "collection"},
		{name: "honest save -> verified", variant: "census", seed: anotherApplicant, act: submit(1, "1234.50"),
			want: verified, newness: "census", scope: "collection"},
		{name: "narrowed read without census -> refused at begin", variant: "naive", seed: anotherApplicant, act: reassign,
			refused: newnessRefused, mentions: []string{"census", "whole_read", "newly_matching"}},
		// Control: the operator accepted the documented risk; the fault
		// passes, which is what the census is for.
		{name: "control: newly_matching lets it through", variant: "matching", seed: anotherApplicant, act: reassign,
			want: verified, newness: "newly_matching", scope: "subject"},
	}
}

// TestSoundReadsCollateralLoss (b): an honest save plus the deletion of
// another applicant's application, a loss outside the filtered read.
func TestSoundReadsCollateralLoss(t *testing.T) {
	f := newSoundFixture(t, loansWorkflow)
	runSound(t, f, soundKinds, collateralCases())
}

func collateralCases() []soundCase {
	return []soundCase{
		{name: "another applicant's record deleted -> conflicting", variant: "census", seed: anotherApplicant, act: submitAndDelete,
			want: reconcile + "REFUTED/conflicting/COLLATERAL_LOSS", newness: "census", scope: "collection"},
		{name: "honest save -> verified", variant: "census", seed: anotherApplicant, act: submit(1, "1234.50"),
			want: verified, newness: "census", scope: "collection"},
		{name: "control: newly_matching cannot see the loss", variant: "matching", seed: anotherApplicant, act: submitAndDelete,
			want: verified, newness: "newly_matching", scope: "subject"},
	}
}

// TestSoundReadsDecimal (c): the amount column is REAL, so "1234.50" reads
// back 1234.5 through every API; compared as decimals the honest save is
// equal and a wrong amount is not.
func TestSoundReadsDecimal(t *testing.T) {
	f := newSoundFixture(t, loansAmountWorkflow)
	runSound(t, f, soundKinds, decimalCases())
}

func decimalCases() []soundCase {
	const mismatch = reconcile + "CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"
	return []soundCase{
		{name: "honest save, as decimal -> verified", variant: "census", workflow: "loans_amount", amount: "1234.50", act: submit(1, "1234.50"),
			want: verified + " CONFIRMED/confirmed/FIELD_EQUAL"},
		{name: "wrong amount, as decimal -> field mismatch", variant: "census", workflow: "loans_amount", amount: "1234.50", act: submit(1, "1243.50"),
			want: mismatch},
		{name: "exponent form, as decimal -> verified", variant: "census", workflow: "loans_amount", amount: "1.2345e3", act: submit(1, "1234.5"),
			want: verified + " CONFIRMED/confirmed/FIELD_EQUAL"},
		{name: "a parameter that is not a decimal -> refused at begin", variant: "census", workflow: "loans_amount", amount: "1.234,50", act: submit(1, "1234.50"),
			refused: configRefused, mentions: []string{"amount"}},
		// Control: compared as text (§2), the honest save is a mismatch,
		// the false negative typed comparison removes.
		{name: "control: as text the honest save mismatches", variant: "census", workflow: "loans_amount", step: "submit_text", amount: "1234.50", act: submit(1, "1234.50"),
			want: mismatch},
	}
}

// TestSoundReadsLateDuplicate (d): the second click lands 0.5 s into
// Verify. The settle floor keeps reading after the first CONFIRMED.
func TestSoundReadsLateDuplicate(t *testing.T) {
	f := newSoundFixture(t, loansWorkflow, loansSettledWorkflow)
	late := func(t *testing.T, f *soundFixture, kind, subject string, _ int64) {
		f.loans.SetLateDuplicate(500 * time.Millisecond)
		defer f.loans.SetLateDuplicate(0)
		submit(1, "1234.50")(t, f, kind, subject, 0)
	}
	runSound(t, f, soundKinds, []soundCase{
		{name: "duplicate mid-verify, settle floor -> conflicting", variant: "census", workflow: "loans_settled", act: late,
			want: countOver},
		{name: "honest save, settle floor -> verified after the floor", variant: "census", workflow: "loans_settled", act: submit(1, "1234.50"),
			want: verified, atLeast: 2 * time.Second},
		// Control: without the floor Verify answers at the first CONFIRMED,
		// before the duplicate lands.
		{name: "control: no floor lets it through", variant: "census", act: late,
			want: verified},
	})
}

// seed99 leaves exactly 99 applications in the store, of other applicants.
func seed99(t *testing.T, f *soundFixture, subject string) int64 {
	f.loans.Reset(t)
	f.loans.Seed(t, subject+"-existing", 99)
	return 0
}

// row is a truncation case: the whole collection read after 99 existing
// applications and times submits.
func row(name, variant string, times int, want string) soundCase {
	return soundCase{name: name, variant: variant, seed: seed99, act: submit(times, "1234.50"), want: want,
		newness: "whole_read", scope: "collection"}
}

// sqlWholeCases: sql reads the table itself, with no page to be cut at.
func sqlWholeCases() []soundCase {
	return []soundCase{
		row("99 existing, double submit -> conflicting", "whole", 2, countOver),
		row("99 existing, honest save -> verified", "whole", 1, verified),
		// A LIMIT in the query cuts the read as a server's page does; no
		// verdict could see it, so the daemon does not count a capped query
		// as whole and Begin refuses the change claim (lint's capped_read
		// names the cap too: TestSoundReadsLint).
		{name: "a LIMIT 100 in the query -> refused at begin", variant: "whole_capped", seed: seed99, act: submit(2, "1234.50"),
			refused: newnessRefused, mentions: []string{"sql_query limits rows (LIMIT)", "require_proven_newness"}},
	}
}

// TestSoundReadsTruncation (e): the server answers at most 100 records
// unless asked; 99 applications exist and the automation submits twice
// (101). The read of the whole collection must state how it is complete.
func TestSoundReadsTruncation(t *testing.T) {
	f := newSoundFixture(t, loansWorkflow)
	const (
		truncated  = reconcile + "INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED"
		incomplete = reconcile + "INDETERMINATE/indeterminate/READ_INCOMPLETE"
	)
	unstated := soundCase{name: "no pagination, no single_response -> refused", variant: "whole_unstated", seed: seed99, act: submit(2, "1234.50"),
		refused: configRefused, mentions: []string{"pagination", "single_response"}}

	runSound(t, f, []string{"sql"}, sqlWholeCases())
	runSound(t, f, []string{"rest"}, []soundCase{
		unstated,
		row("double submit, max_records -> may be truncated", "whole_max", 2, truncated),
		row("honest save at the cap, max_records -> may be truncated", "whole_max", 1, truncated),
		row("double submit, total_path -> incomplete", "whole_total", 2, incomplete),
		row("double submit, total_header -> incomplete", "whole_header", 2, incomplete),
		row("double submit, paginated -> conflicting", "whole_paginated", 2, countOver),
		row("honest save, paginated -> verified", "whole_paginated", 1, verified),
		row("double submit, limit asked -> conflicting", "whole_asked", 2, countOver),
		row("honest save, limit asked -> verified", "whole_asked", 1, verified),
		row("control: a false single_response lets it through", "whole_asserted", 2, verified),
	})
	runSound(t, f, []string{"graphql"}, []soundCase{
		unstated,
		row("double submit, max_records -> may be truncated", "whole_max", 2, truncated),
		row("double submit, total_path -> incomplete", "whole_total", 2, incomplete),
		row("double submit, offset paging -> conflicting", "whole_paginated", 2, countOver),
		row("honest save, offset paging -> verified", "whole_paginated", 1, verified),
		row("double submit, cursor paging -> conflicting", "whole_cursor", 2, countOver),
		row("honest save, cursor paging -> verified", "whole_cursor", 1, verified),
		row("double submit, limit asked -> conflicting", "whole_asked", 2, countOver),
		row("honest save, limit asked -> verified", "whole_asked", 1, verified),
		row("control: a false single_response lets it through", "whole_asserted", 2, verified),
	})
}

// TestSoundReadsPostgres: the faults (a), (b), (c) and (e) through the
// sql adapter over a real PostgreSQL, whose double precision amount column
// answers 1234.5 for "1234.50" as SQLite's REAL does.
func TestSoundReadsPostgres(t *testing.T) {
	parent, err := os.MkdirTemp("", "e2e-loans-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		t.Fatalf("PostgreSQL could not start: %v", err)
	}
	f := newSoundFixturePostgres(t, pg, loansWorkflow, loansAmountWorkflow)
	sqlOnly := []string{"sql"}
	t.Run("re-assigned", func(t *testing.T) { runSound(t, f, sqlOnly, reassignedCases()) })
	t.Run("collateral loss", func(t *testing.T) { runSound(t, f, sqlOnly, collateralCases()) })
	t.Run("decimal", func(t *testing.T) { runSound(t, f, sqlOnly, decimalCases()) })
	t.Run("truncation", func(t *testing.T) { runSound(t, f, sqlOnly, sqlWholeCases()) })
}

// TestSoundReadsLint: the read guards lint applies to a deployment file
// (no daemon): a sql query capped by its own LIMIT is capped_read, and an
// irreversible step's change claim with no settle window is
// no_settle_window; the sound deployment under the settled workflow has
// neither.
func TestSoundReadsLint(t *testing.T) {
	f := &soundFixture{loans: httprecords.NewLoans(t, true), dir: t.TempDir(), deps: map[string]string{}}
	f.sqlSource = "  sqlite_database: " + f.loans.DBPath + "\n"
	loans := writeFile(t, f.dir, "loans.yaml", loansWorkflow)
	settled := writeFile(t, f.dir, "loans_settled.yaml", loansSettledWorkflow)
	lint := func(workflow, deployment string) []string {
		t.Helper()
		out, err := exec.Command(filepath.Join(bins.dir, "verifyctl"), "lint", "--workflow", workflow, "--deployment", deployment).Output()
		if err != nil {
			t.Fatalf("verifyctl lint --workflow %s --deployment %s: %v\n%s", workflow, deployment, err, out)
		}
		var report struct {
			Findings []struct {
				Code string `json:"code"`
				Path string `json:"path"`
			} `json:"findings"`
		}
		if err := json.Unmarshal(out, &report); err != nil {
			t.Fatalf("lint output: %v\n%s", err, out)
		}
		var codes []string
		for _, fd := range report.Findings {
			codes = append(codes, fd.Code+"@"+fd.Path)
		}
		return codes
	}
	if got := lint(loans, f.dep(t, "sql", "whole_capped")); !slices.Contains(got, "capped_read@effects.sql_query") || !slices.Contains(got, "no_settle_window@steps[0].effects[0]") {
		t.Errorf("capped read, no settle window: findings %v, want capped_read@effects.sql_query and no_settle_window@steps[0].effects[0]", got)
	}
	for _, code := range lint(settled, f.dep(t, "sql", "whole")) {
		if strings.HasPrefix(code, "capped_read@") || strings.HasPrefix(code, "no_settle_window@") {
			t.Errorf("the sound deployment under the settled workflow: finding %s", code)
		}
	}
}

// TestSoundReadsFaultsServe checks the harness itself, with no daemon: each
// fault the cases rely on is there, seen through the REST and GraphQL APIs
// and in the SQLite file the sql adapter reads.
func TestSoundReadsFaultsServe(t *testing.T) {
	l := httprecords.NewLoans(t, true)
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(l.DBPath)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rows := func(where string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM applications `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	gqlCount := func(query string) int {
		t.Helper()
		var out map[string][]json.RawMessage
		if err := json.Unmarshal(l.GraphQL(t, query, nil), &out); err != nil {
			t.Fatal(err)
		}
		for _, v := range out {
			return len(v)
		}
		return -1
	}

	t.Run("page cap: 99 existing and a double submit read as 100 unless asked", func(t *testing.T) {
		l.Seed(t, "existing", 99)
		l.Submit(t, "a-1", "car", "1234.50")
		l.SubmitGraphQL(t, "a-1", "car", "1234.50")
		apps, total, header := l.List(t, "")
		if rows("") != 101 || len(apps) != 100 || total != 101 || header != "101" {
			t.Errorf("rows %d; unasked list %d records, total %d, X-Total-Count %s; want 101, 100, 101, 101", rows(""), len(apps), total, header)
		}
		if apps, _, _ := l.List(t, "limit=1000"); len(apps) != 101 {
			t.Errorf("asked list: %d records, want 101", len(apps))
		}
		if n := gqlCount(`{ applications { id } }`); n != 100 {
			t.Errorf("GraphQL list without a limit: %d records, want 100", n)
		}
		if n := gqlCount(`{ applications(limit: 1000) { id } }`); n != 101 {
			t.Errorf("GraphQL list with a limit: %d records, want 101", n)
		}
	})

	t.Run("re-assign is an update: no new row, same id, new applicant", func(t *testing.T) {
		l.Reset(t)
		other := l.Insert(t, "b-1", "car", "500.00")
		l.Reassign(t, other, "a-2", "car", "1234.50")
		if rows("") != 1 || rows("WHERE id = ? AND applicant = 'a-2'", other) != 1 {
			t.Errorf("after the REST re-assign: %+v", l.All(t))
		}
		l.ReassignGraphQL(t, other, "a-3", "car", "1234.50")
		if rows("") != 1 || rows("WHERE id = ? AND applicant = 'a-3'", other) != 1 {
			t.Errorf("after the GraphQL re-assign: %+v", l.All(t))
		}
	})

	t.Run("deleting another applicant's record", func(t *testing.T) {
		l.Reset(t)
		a, b := l.Insert(t, "b-2", "car", "1.00"), l.Insert(t, "b-3", "car", "1.00")
		l.Delete(t, a)
		l.DeleteGraphQL(t, b)
		if n := rows(""); n != 0 {
			t.Errorf("%d rows left, want 0", n)
		}
	})

	t.Run("a decimal stored as a float", func(t *testing.T) {
		l.Reset(t)
		id := l.Submit(t, "a-4", "car", "1234.50").ID
		var text string
		if err := db.QueryRow(`SELECT CAST(amount AS TEXT) FROM applications WHERE id = ?`, id).Scan(&text); err != nil || text != "1234.5" {
			t.Errorf("stored amount %q (%v), want 1234.5", text, err)
		}
		if apps, _, _ := l.List(t, "applicant=a-4"); len(apps) != 1 || !strings.Contains(string(apps[0]), `"amount":1234.5,`) {
			t.Errorf("REST record %s, want amount 1234.5", apps)
		}
		if data := l.GraphQL(t, `{ applications(applicant: "a-4") { amount } }`, nil); string(data) != `{"applications":[{"amount":1234.5}]}` {
			t.Errorf("GraphQL answered %s, want amount 1234.5", data)
		}
	})

	t.Run("a duplicate landing half a second later", func(t *testing.T) {
		l.Reset(t)
		l.SetLateDuplicate(500 * time.Millisecond)
		l.Submit(t, "a-5", "car", "1234.50")
		l.SetLateDuplicate(0)
		if n := rows("WHERE applicant = 'a-5'"); n != 1 {
			t.Errorf("right after the submit: %d rows, want 1", n)
		}
		l.WaitIdle()
		all := l.All(t)
		if len(all) != 2 || all[1].Applicant != "a-5" {
			t.Fatalf("after the late duplicate: %+v, want two of a-5", all)
		}
		first, _ := time.Parse(time.RFC3339Nano, all[0].CreatedAt)
		second, _ := time.Parse(time.RFC3339Nano, all[1].CreatedAt)
		if gap := second.Sub(first); gap < 500*time.Millisecond {
			t.Errorf("the duplicate landed %v after the submit, want at least 0.5 s", gap)
		}
	})
}

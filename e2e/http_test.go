package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// httpBoundary is one HTTP system of record wired into a deployment.
type httpBoundary struct {
	dir        string
	deployment string
	effects    string
}

func newBoundary(t *testing.T, deployment, effects string) *httpBoundary {
	t.Helper()
	dir := t.TempDir()
	return &httpBoundary{
		dir:        dir,
		deployment: writeFile(t, dir, "deployment.yaml", deployment),
		effects:    writeFile(t, dir, "effects.yaml", effects),
	}
}

// beginHTTP begins a session; params are name=value pairs.
func (d *daemon) beginHTTP(t *testing.T, b *httpBoundary, params ...string) beginOutput {
	t.Helper()
	args := []string{"begin", "--deployment-name", d.register(t, b.deployment), "--effects", b.effects}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	out, code := d.ctl(t, args...)
	if code != 0 {
		t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	return mustJSON[beginOutput](t, out)
}

// httpDaemon is a daemon whose secrets policy lets deployments name the
// test servers' credentials, given in env.
func httpDaemon(t *testing.T, env ...string) *daemon {
	return startDaemon(t, daemonOpts{config: "secrets:\n  allow: [ERP_*, GQL_*, FHIR_*]\n", env: env})
}

type httpCase struct {
	name   string
	act    func(t *testing.T, subject string)
	want   string
	substr string // a reason message of the first effect must contain it, when set
}

func runHTTPCases(t *testing.T, d *daemon, b *httpBoundary, kind string, param func(i int) []string, cases []httpCase) {
	t.Helper()
	defer func() {
		for _, e := range d.env {
			if _, secret, _ := strings.Cut(e, "="); strings.Contains(d.logs(), secret) {
				t.Errorf("the daemon log carries the secret of %s", e[:strings.IndexByte(e, '=')])
			}
		}
	}()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params := param(i)
			begun := d.beginHTTP(t, b, params...)
			if len(begun.Effects) == 0 || begun.Effects[0].Tier != 1 || begun.Effects[0].Candidate != kind {
				t.Fatalf("begin effects: %+v", begun.Effects)
			}
			_, subject, _ := strings.Cut(params[0], "=")
			tc.act(t, subject)
			v := d.verify(t, begun.SessionID)
			if got := v.summary(); got != tc.want {
				t.Errorf("verify = %s\nwant     %s\ndaemon log:\n%s", got, tc.want, d.logs())
			}
			if v.Effects[0].Substrate != kind || v.Effects[0].Tier != 1 {
				t.Errorf("substrate/tier = %s/%d, want %s/1", v.Effects[0].Substrate, v.Effects[0].Tier, kind)
			}
			if tc.substr != "" {
				found := false
				for _, r := range v.Effects[0].Reasons {
					found = found || strings.Contains(r.Message, tc.substr)
				}
				if !found {
					t.Errorf("no reason mentions %q: %+v", tc.substr, v.Effects[0].Reasons)
				}
			}
		})
	}
}

// TestRESTThroughDaemon: begin -> the automation writes through a
// Frappe-shaped API over TLS -> verify, through the real daemon and the
// verifier-adapter-rest plugin.
func TestRESTThroughDaemon(t *testing.T) {
	erp := httprecords.NewFrappe(t, true)
	faulty := httprecords.NewFrappe(t, true)
	d := httpDaemon(t, "ERP_READ_TOKEN="+erp.Token(), "ERP_FAULTY_TOKEN="+faulty.Token())
	deployment := func(f *httprecords.Frappe, env string) string {
		return fmt.Sprintf(`effects:
  kind: rest
  base_url: %s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type","notes"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation asc
  path_params: {patient: {param: patient_id}}
  records_key: data
  pagination: {offset_param: limit_start, limit_param: limit_page_length, page_size: 2}
  auth: {header: Authorization, value_env: %s}
  ca_file: %s
  newness: newly_matching
`, f.URL, env, f.CAFile)
	}
	save := func(f *httprecords.Frappe, patient, notes string, times int) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			for range times {
				f.Post(t, "Patient Encounter", map[string]any{"patient": p + patient, "encounter_type": "Triage", "notes": notes})
			}
		}
	}
	// Earlier visits of every patient make the list span pages.
	for i := range 4 {
		for range 3 {
			erp.Post(t, "Patient Encounter", map[string]any{"patient": fmt.Sprintf("PAT-%d", i), "encounter_type": "Vitals", "notes": "earlier visit"})
		}
	}
	b := newBoundary(t, deployment(erp, "ERP_READ_TOKEN"), `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {patient: {param: patient_id}, encounter_type: Triage}
  field: notes
  value: {param: notes}
  timeout_s: 0.5
`)
	params := func(i int) []string { return []string{fmt.Sprintf("patient_id=PAT-%d", i), "notes=Follow-up"} }
	runHTTPCases(t, d, b, "rest", params, []httpCase{
		{name: "confirmed", act: save(erp, "", "Follow-up", 1),
			want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{name: "duplicate", act: save(erp, "", "Follow-up", 2),
			want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{name: "wrong subject", act: save(erp, "-other", "Follow-up", 1),
			want: "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH"},
		{name: "partial save", act: save(erp, "", "", 1),
			want: "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
	})

	// The fault cases count every record of the patient (no change claim);
	// they are about faults, so this registered deployment relaxes that.
	fb := newBoundary(t, "policy: {require_change_claim: false}\n"+deployment(faulty, "ERP_FAULTY_TOKEN"),
		"- {kind: record_written, match: {patient: {param: patient_id}}, risk: irreversible, timeout_s: 0.5}\n")
	// Each fault is set after the write and cleared when its case ends,
	// so the next case can read its baseline.
	write := func(f *httprecords.Frappe, fault, undo func()) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			f.Post(t, "Patient Encounter", map[string]any{"patient": p, "encounter_type": "Triage"})
			fault()
			t.Cleanup(undo)
		}
	}
	const unavailable = "RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE"
	runHTTPCases(t, d, fb, "rest", func(i int) []string { return []string{fmt.Sprintf("patient_id=F-%d", i)} }, []httpCase{
		{name: "500 -> unavailable", act: write(faulty, func() { faulty.FailWith(http.StatusInternalServerError) }, func() { faulty.FailWith(0) }),
			want: unavailable, substr: "500 Internal Server Error"},
		{name: "slow past the deadline -> unavailable", act: write(faulty, func() { faulty.SetDelay(10 * time.Second) }, func() { faulty.SetDelay(0) }),
			want: unavailable, substr: "before the capture deadline"},
		// Last: the rotated credentials cannot be restored.
		{name: "401 -> unavailable", act: write(faulty, faulty.Rotate, func() {}),
			want: unavailable, substr: "401 Unauthorized"},
	})
}

// TestRESTTruncationThroughDaemon: a server that answers 100 records
// unless asked for more (and never more), 99 earlier records of the
// patient, and a double submit (101). A deployment declaring
// single_response with max_records 100 reads 100 records and is not
// judged (READ_MAY_BE_TRUNCATED); one checking the body's total_count
// reads 100 of 101 (READ_INCOMPLETE); neither is VERIFIED. An honest save
// that keeps the list under the cap is.
func TestRESTTruncationThroughDaemon(t *testing.T) {
	erp := httprecords.NewFrappe(t, true)
	erp.DefaultPage(100)
	erp.PageCap(100)
	d := httpDaemon(t, "ERP_READ_TOKEN="+erp.Token())
	deployment := func(completeness string) string {
		return fmt.Sprintf(`effects:
  kind: rest
  base_url: %s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation asc
  path_params: {patient: {param: patient_id}}
  records_key: data
  single_response: true
  %s
  newness: newly_matching
  auth: {header: Authorization, value_env: ERP_READ_TOKEN}
  ca_file: %s
`, erp.URL, completeness, erp.CAFile)
	}
	const effects = `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
`
	seed := func(patient string, n int) {
		for range n {
			erp.Insert("Patient Encounter", map[string]any{"patient": patient, "encounter_type": "Triage", "notes": "earlier"})
		}
	}
	save := func(times int) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			for range times {
				erp.Post(t, "Patient Encounter", map[string]any{"patient": p, "encounter_type": "Triage"})
			}
		}
	}
	seed("CAP-0", 99)
	seed("CAP-1", 98)
	capped := newBoundary(t, deployment("max_records: 100"), effects)
	// Preflight says how the read is complete and that write access is not
	// checked; with 99 records the response is not yet full.
	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, capped.deployment), "--param", "patient_id=CAP-0")
	for _, w := range []string{`"reachable": true`, "complete by single_response", "100 or more records are not judged", "read 99 records", "can also write is not checked"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("preflight exit %d lacks %q: %s", code, w, out)
		}
	}
	runHTTPCases(t, d, capped, "rest",
		func(i int) []string { return []string{fmt.Sprintf("patient_id=CAP-%d", i)} }, []httpCase{
			{name: "double submit under the cap -> may be truncated", act: save(2),
				want: "RECONCILIATION_REQUIRED INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED", substr: "at least max_records (100)"},
			{name: "honest save under the cap", act: save(1), want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		})
	seed("TOT-0", 99)
	runHTTPCases(t, d, newBoundary(t, deployment("total_path: total_count"), effects), "rest",
		func(i int) []string { return []string{fmt.Sprintf("patient_id=TOT-%d", i)} }, []httpCase{
			{name: "double submit past the cap -> incomplete", act: save(2),
				want: "RECONCILIATION_REQUIRED INDETERMINATE/indeterminate/READ_INCOMPLETE", substr: "declares 101 records (total_path total_count) but the read holds 100"},
		})
}

// TestGraphQLPagedThroughDaemon: a server answering 3 encounters per page
// unless asked for more; the deployment pages by Relay cursor and checks
// the connection's totalCount, so a patient's earlier encounters spread
// over several pages and a double submit is REFUTED, not read as one.
func TestGraphQLPagedThroughDaemon(t *testing.T) {
	g := httprecords.NewGraphQL(t, true)
	g.PageCap(3)
	d := httpDaemon(t, "GQL_TOKEN="+g.Token)
	b := newBoundary(t, fmt.Sprintf(`effects:
  kind: graphql
  base_url: %s
  graphql_query: |
    query Encounters($patient: String!, $after: String) {
      encounterConnection(patientId: $patient, after: $after) {
        nodes { id patientId type }
        pageInfo { hasNextPage endCursor }
        totalCount
      }
    }
  graphql_variables: {patient: {param: patient_id}}
  graphql_records_path: encounterConnection.nodes
  pagination: {after_variable: after, page_info_path: encounterConnection.pageInfo}
  total_path: encounterConnection.totalCount
  newness: newly_matching
  auth: {bearer_env: GQL_TOKEN}
  ca_file: %s
`, g.URL, g.CAFile), `
- kind: record_written
  match: {patientId: {param: patient_id}, type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
`)
	for i := range 2 {
		for range 7 {
			g.Insert(httprecords.Encounter{PatientID: fmt.Sprintf("r-%d", i), Type: "Triage"})
		}
	}
	add := func(times int) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			for range times {
				g.Add(t, p, "Triage", "", "")
			}
		}
	}
	runHTTPCases(t, d, b, "graphql", func(i int) []string { return []string{fmt.Sprintf("patient_id=r-%d", i)} }, []httpCase{
		{name: "honest save on the third page", act: add(1), want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		{name: "double submit past two pages", act: add(2), want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER"},
	})
}

// TestGraphQLThroughDaemon: writes through a graphql-go API's mutation,
// reads through verifier-adapter-graphql; the deployment's freshness window
// demotes a stale match; a mutation is refused before anything runs.
func TestGraphQLThroughDaemon(t *testing.T) {
	g := httprecords.NewGraphQL(t, true)
	d := httpDaemon(t, "GQL_TOKEN="+g.Token)
	b := newBoundary(t, fmt.Sprintf(`effects:
  kind: graphql
  base_url: %s
  graphql_query: |
    query Encounters($patient: String!) {
      encounters(patientId: $patient) { id patientId type note updatedAt }
    }
  graphql_variables: {patient: {param: patient_id}}
  graphql_records_path: encounters
  # The query asks no limit: one response holds the whole list, and one
  # holding 20 or more encounters may have been cut short.
  single_response: true
  max_records: 20
  auth: {bearer_env: GQL_TOKEN}
  ca_file: %s
  freshness_field: updatedAt
  freshness_window_s: 60
  newness: newly_matching
`, g.URL, g.CAFile), `
- kind: record_written
  match: {patientId: {param: patient_id}, type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
`)
	add := func(note, updatedAt string, times int) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			for range times {
				g.Add(t, p, "Triage", note, updatedAt)
			}
		}
	}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	runHTTPCases(t, d, b, "graphql", func(i int) []string { return []string{fmt.Sprintf("patient_id=g-%d", i)} }, []httpCase{
		{name: "confirmed", act: add("Follow-up", "", 1), want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		{name: "duplicate", act: add("Follow-up", "", 2), want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER"},
		{name: "stale", act: add("Follow-up", old, 1), want: "RECONCILIATION_REQUIRED INDETERMINATE/stale/STALE"},
		{name: "a full response -> may be truncated", act: add("Follow-up", "", 20), want: "RECONCILIATION_REQUIRED INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED", substr: "max_records (20)"},
		{name: "errors in the answer -> unavailable", act: func(t *testing.T, p string) {
			g.Add(t, p, "Triage", "x", "")
			g.ReadErrors(true)
			t.Cleanup(func() { g.ReadErrors(false) })
		}, want: "RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE", substr: "connection reset by peer"},
	})

	mutation := newBoundary(t, fmt.Sprintf(`effects:
  kind: graphql
  base_url: %s
  graphql_query: 'mutation { addEncounter(patientId: "p", type: "Triage") { id } }'
  auth: {bearer_env: GQL_TOKEN}
  ca_file: %s
`, g.URL, g.CAFile), "- {kind: record_written, match: {patientId: p}, count_new_only: true}\n")
	before := g.Requests()
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, mutation.deployment), "--effects", mutation.effects)
	if r := mustJSON[beginOutput](t, out); code == 0 || r.Error == nil || !strings.Contains(r.Error.Message, "mutation") {
		t.Errorf("a mutation: exit %d, %s; want a refusal naming the mutation", code, out)
	}
	if n := g.Requests() - before; n != 0 {
		t.Errorf("the refused configuration sent %d requests", n)
	}
}

// TestFHIRThroughDaemon: Observations created through a FHIR R4 API,
// searched through verifier-adapter-fhir across Bundle pages.
func TestFHIRThroughDaemon(t *testing.T) {
	f := httprecords.NewFHIR(t, true)
	d := httpDaemon(t, "FHIR_TOKEN="+f.Token)
	b := newBoundary(t, fmt.Sprintf(`effects:
  kind: fhir
  base_url: %s
  resource_type: Observation
  search_params: {_count: "1"}
  search_param_exprs: {patient: {param: patient_ref}}
  field_paths:
    id: id
    patient: subject.reference
    status: status
    code: code.coding.0.code
    value: valueQuantity.value
  access_token_env: FHIR_TOKEN
  ca_file: %s
  newness: newly_matching
`, f.URL, f.CAFile), `
- kind: record_written
  match: {patient: {param: patient_ref}, status: final, code: 29463-7}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {patient: {param: patient_ref}, status: final}
  field: value
  value: {param: weight}
  timeout_s: 0.5
`)
	observe := func(status, value string, times int) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			for range times {
				f.Create(t, "Observation", httprecords.Observation(p, status, time.Now().UTC().Format(time.RFC3339), value))
			}
		}
	}
	params := func(i int) []string {
		p := fmt.Sprintf("Patient/e2e-%d", i)
		// Two earlier preliminary readings: the search spans pages.
		for range 2 {
			f.Create(t, "Observation", httprecords.Observation(p, "preliminary", "2026-01-01T00:00:00Z", "180"))
		}
		return []string{"patient_ref=" + p, "weight=185"}
	}
	runHTTPCases(t, d, b, "fhir", params, []httpCase{
		{name: "confirmed across pages", act: observe("final", "185.0", 1),
			want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{name: "duplicate", act: observe("final", "185", 2),
			want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{name: "wrong subject", act: func(t *testing.T, p string) { observe("final", "185", 1)(t, p+"-other") },
			want: "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH"},
		{name: "partial save", act: observe("final", "", 1),
			want: "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
		{name: "OperationOutcome -> unavailable", act: func(t *testing.T, p string) {
			observe("final", "185", 1)(t, p)
			f.FailWith(http.StatusInternalServerError)
			t.Cleanup(func() { f.FailWith(0) })
		}, want: "RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE INDETERMINATE/unavailable/SOR_UNREACHABLE",
			substr: "OperationOutcome: fatal exception"},
	})
}

// TestGraphQLKitSpellingThroughDaemon: a deployment written for the effect
// kit, with graphql_freshness_field and graphql_freshness_window_s, loads
// as freshness_field / freshness_window_s and judges freshness as they do
// (a match outside the window is stale); preflight and the daemon log say
// which key to write instead.
func TestGraphQLKitSpellingThroughDaemon(t *testing.T) {
	g := httprecords.NewGraphQL(t, true)
	d := httpDaemon(t, "GQL_TOKEN="+g.Token)
	b := newBoundary(t, fmt.Sprintf(`effects:
  kind: graphql
  base_url: %s
  graphql_query: |
    query Encounters($patient: String!) {
      encounters(patientId: $patient) { id patientId type note updatedAt }
    }
  graphql_variables: {patient: {param: patient_id}}
  graphql_records_path: encounters
  single_response: true
  max_records: 20
  auth: {bearer_env: GQL_TOKEN}
  ca_file: %s
  graphql_freshness_field: updatedAt
  graphql_freshness_window_s: 60
  newness: newly_matching
`, g.URL, g.CAFile), `
- kind: record_written
  match: {patientId: {param: patient_id}, type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
`)
	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, b.deployment), "--param", "patient_id=k-pre")
	if code != 0 || !strings.Contains(out, "effects.graphql_freshness_field: read as freshness_field") ||
		!strings.Contains(out, "effects.graphql_freshness_window_s: read as freshness_window_s") {
		t.Fatalf("preflight exit %d: %s\nwant a warning per kit key naming the canonical key", code, out)
	}
	add := func(updatedAt string) func(*testing.T, string) {
		return func(t *testing.T, p string) { g.Add(t, p, "Triage", "Follow-up", updatedAt) }
	}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	runHTTPCases(t, d, b, "graphql", func(i int) []string { return []string{fmt.Sprintf("patient_id=k-%d", i)} }, []httpCase{
		{name: "fresh", act: add(""), want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		{name: "stale", act: add(old), want: "RECONCILIATION_REQUIRED INDETERMINATE/stale/STALE"},
	})
	if logs := d.logs(); strings.Count(logs, "read as freshness_field") != 1 {
		t.Errorf("the daemon log names the canonical key %d times, want once (at load):\n%s", strings.Count(logs, "read as freshness_field"), logs)
	}
}

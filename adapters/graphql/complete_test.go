package graphql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// offsetQuery pages encounters by limit and offset and asks their total.
const offsetQuery = `query Q($patient: String!, $limit: Int, $offset: Int) {
  encounters(patientId: $patient, limit: $limit, offset: $offset) { id patientId type }
  encounterCount(patientId: $patient)
}`

// relayQuery pages encounters by Relay cursor.
const relayQuery = `query Q($patient: String!, $first: Int, $after: String) {
  encounterConnection(patientId: $patient, first: $first, after: $after) {
    nodes { id patientId type }
    pageInfo { hasNextPage endCursor }
    totalCount
  }
}`

// rt bounds each read of these tests.
const rt = 10 * time.Second

func offsetPaged(size int) func(map[string]any) {
	return func(s map[string]any) {
		s["graphql_query"] = offsetQuery
		s["graphql_records_path"] = "encounters"
		s["pagination"] = map[string]any{"limit_variable": "limit", "offset_variable": "offset", "page_size": size}
	}
}

func relayPaged(pagination map[string]any) func(map[string]any) {
	return func(s map[string]any) {
		s["graphql_query"] = relayQuery
		s["graphql_records_path"] = "data.encounterConnection.nodes"
		s["pagination"] = pagination
	}
}

func seed(g *httprecords.GraphQL, patient string, n int) {
	for i := range n {
		g.Insert(httprecords.Encounter{PatientID: patient, Type: "Triage", UpdatedAt: fmt.Sprintf("2026-01-01T00:00:%02dZ", i%60)})
	}
}

// TestCompletenessRefusals: a graphql section must say how its read is
// complete, and its pagination must name variables the query declares,
// of the right types, that graphql_variables does not bind.
func TestCompletenessRefusals(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	relay := relayPaged
	tests := []struct {
		name     string
		edit     func(map[string]any)
		wantPath string
		wantMsg  []string
	}{
		{"neither pagination nor single_response", func(s map[string]any) { delete(s, "single_response") }, "pagination",
			[]string{"pagination: {...}", "single_response: true", "max_records"}},
		{"no paging style", relay(map[string]any{"max_pages": 3}), "pagination", []string{"limit_variable, offset_variable, page_size", "after_variable, page_info_path"}},
		{"undeclared offset variable", func(s map[string]any) {
			offsetPaged(10)(s)
			s["pagination"].(map[string]any)["offset_variable"] = "skip"
		}, "pagination.offset_variable", []string{"declares no $skip"}},
		{"paging variable also bound", func(s map[string]any) {
			offsetPaged(10)(s)
			s["graphql_variables"].(map[string]any)["limit"] = map[string]any{"param": "patient_id"}
		}, "pagination.limit_variable", []string{"also bound under graphql_variables"}},
		{"offset variable not an Int", func(s map[string]any) {
			offsetPaged(10)(s)
			s["graphql_query"] = strings.Replace(offsetQuery, "$offset: Int", "$offset: String", 1)
		}, "pagination.offset_variable", []string{"an offset is an Int"}},
		{"offset without limit", func(s map[string]any) {
			offsetPaged(10)(s)
			s["pagination"] = map[string]any{"offset_variable": "offset"}
		}, "pagination.limit_variable", []string{"missing"}},
		{"limit without page_size", func(s map[string]any) {
			offsetPaged(10)(s)
			delete(s["pagination"].(map[string]any), "page_size")
		}, "pagination.page_size", []string{"missing"}},
		{"cursor without page_info_path", relay(map[string]any{"after_variable": "after"}), "pagination.page_info_path", []string{"pageInfo"}},
		{"non-null cursor", func(s map[string]any) {
			relayPaged(map[string]any{"after_variable": "after", "page_info_path": "encounterConnection.pageInfo"})(s)
			s["graphql_query"] = strings.Replace(relayQuery, "$after: String", "$after: String!", 1)
		}, "pagination.after_variable", []string{"nullable"}},
		{"both styles", relay(map[string]any{"after_variable": "after", "offset_variable": "first", "page_info_path": "encounterConnection.pageInfo"}),
			"pagination.offset_variable", []string{"choose one paging style"}},
		{"max_records with pagination", func(s map[string]any) { offsetPaged(10)(s); s["max_records"] = 10 }, "max_records", []string{"single_response only"}},
		{"malformed field path", func(s map[string]any) { s["field_paths"] = map[string]any{"id": "id", "kind": "type[0"} }, "field_paths.kind", []string{"not closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), request(t, section(g, tt.edit), map[string]string{"patient_id": "p-1"}, map[string]string{"auth.bearer_env": g.Token}))
			var ce *refusal.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath {
				t.Fatalf("Configure = %v; want a refusal at %s", err, tt.wantPath)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(ce.Message, w) {
					t.Errorf("message %q lacks %q", ce.Message, w)
				}
			}
		})
	}
}

// TestPagination: offset paging and Relay cursors read every page of a
// list the server answers a few records at a time, check the declared
// total, and a read past max_pages is READ_INCOMPLETE.
func TestPagination(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		edit     func(map[string]any)
		wantReqs int
		wantCode string
	}{
		{"offset", func(s map[string]any) { offsetPaged(3)(s); s["total_path"] = "encounterCount" }, 4, ""},
		{"offset asking more than the server's default", func(s map[string]any) { offsetPaged(50)(s); s["total_path"] = "data.encounterCount" }, 2, ""},
		{"relay", func(s map[string]any) {
			relayPaged(map[string]any{"after_variable": "after", "page_info_path": "encounterConnection.pageInfo"})(s)
			s["total_path"] = "encounterConnection.totalCount"
		}, 3, ""},
		{"relay with a page size", relayPaged(map[string]any{"after_variable": "$after", "page_info_path": "data.encounterConnection.pageInfo", "limit_variable": "first", "page_size": 5}), 2, ""},
		{"relay past max_pages", relayPaged(map[string]any{"after_variable": "after", "page_info_path": "encounterConnection.pageInfo", "max_pages": 2}), 2, sdk.CodeReadIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httprecords.NewGraphQL(t, true)
			g.PageCap(3)
			seed(g, "p-1", 8)
			seed(g, "p-2", 4)
			ip := configured(t, g, tt.edit, map[string]string{"patient_id": "p-1"})
			reqs := g.Requests()
			got := read(t, ip, true, rt)
			if n := g.Requests() - reqs; n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantCode != "" {
				if got.Reachable || got.Code != tt.wantCode || !strings.Contains(got.Reason, "more than 2 pages") {
					t.Fatalf("read = %+v; want unreachable with %s", got, tt.wantCode)
				}
				return
			}
			if !got.Reachable || len(got.Records) != 8 {
				t.Fatalf("read: reachable %v, %d records (%s); want 8", got.Reachable, len(got.Records), got.Reason)
			}
			seen := map[any]bool{}
			for _, r := range got.Records {
				if r["patientId"] != "p-1" || seen[r["id"]] {
					t.Errorf("record %v: another patient's, or read twice", r)
				}
				seen[r["id"]] = true
			}
		})
	}
}

// TestDoubleSubmitUnderCap: the server answers 100 encounters unless asked
// for more; 99 exist and a double submit makes 101. A query without a
// limit declared single_response with max_records 100 is
// READ_MAY_BE_TRUNCATED, so the double submit is not CONFIRMED; a total
// check says READ_INCOMPLETE; paging reads all 101 and refutes it.
func TestDoubleSubmitUnderCap(t *testing.T) {
	t.Parallel()
	const effect = `{kind: record_written, match: {patientId: {param: patient_id}}, count_new_only: true, expected_count: 1}`
	params := map[string]string{"patient_id": "p-1"}
	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"max_records", func(s map[string]any) { s["max_records"] = 100 }, "INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED"},
		{"total", func(s map[string]any) {
			s["graphql_query"] = `query Q($patient: String!) { encounters(patientId: $patient) { id patientId type } encounterCount(patientId: $patient) }`
			s["graphql_records_path"] = "encounters"
			s["total_path"] = "encounterCount"
		}, "INDETERMINATE/indeterminate/READ_INCOMPLETE"},
		{"paged", offsetPaged(40), "REFUTED/conflicting/COUNT_OVER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httprecords.NewGraphQL(t, true)
			g.PageCap(100)
			seed(g, "p-1", 99)
			ip := configured(t, g, tt.edit, params)
			before := read(t, ip, false, rt)
			if !before.Reachable || len(before.Records) != 99 {
				t.Fatalf("before: %d records (%s)", len(before.Records), before.Reason)
			}
			g.Add(t, "p-1", "Triage", "", "")
			g.Add(t, "p-1", "Triage", "", "")
			after := read(t, ip, true, rt)
			if got := httprecords.Judge(t, effect, params, before, after, ""); got != tt.want {
				t.Errorf("verdict %s, want %s (after: %d records, %s)", got, tt.want, len(after.Records), after.Reason)
			}
		})
	}
}

// TestErrorMessages: a failed read's reason carries the server's
// errors[].message, clipped, with the credential masked.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	g.Add(t, "p-1", "Triage", "", "")
	ip := configured(t, g, nil, map[string]string{"patient_id": "p-1"})
	g.ErrorMessage(`Cannot query field "loanAmount" on type "Application". Did you mean "loan_amount"? (request from {auth})`)
	got := read(t, ip, true, rt)
	if got.Reachable || got.Code != "" || !strings.Contains(got.Reason, `400 Bad Request: Cannot query field "loanAmount"`) || !strings.Contains(got.Reason, `Did you mean "loan_amount"?`) {
		t.Errorf("reason %q; want the server's message", got.Reason)
	}
	if strings.Contains(got.Reason, g.Token) {
		t.Errorf("reason %q carries the token", got.Reason)
	}
	g.ErrorMessage(strings.Repeat("x", 5000))
	if got := read(t, ip, true, rt); len(got.Reason) > 600 {
		t.Errorf("a 5000-byte message made a %d-byte reason", len(got.Reason))
	}
	// Through the daemon's reason, the judge keeps it.
	g.ErrorMessage(`Did you mean "loan_amount"?`)
	after := read(t, ip, true, rt)
	if v := httprecords.Judge(t, `{kind: record_written, match: {patientId: {param: patient_id}}}`, map[string]string{"patient_id": "p-1"}, after, after, ""); v != "INDETERMINATE/unavailable/SOR_UNREACHABLE" {
		t.Errorf("verdict %s", v)
	}
}

// TestFieldPathsRename: field_paths shape graphql records as rest's.
func TestFieldPathsRename(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	g.Add(t, "p-1", "Triage", "n", "")
	ip := configured(t, g, func(s map[string]any) { s["field_paths"] = map[string]any{"id": "id", "kind": "type"} }, map[string]string{"patient_id": "p-1"})
	got := read(t, ip, true, rt)
	if !got.Reachable || len(got.Records) != 1 || got.Records[0]["kind"] != "Triage" || len(got.Records[0]) != 2 {
		t.Fatalf("read %+v; want one record {id, kind: Triage}", got)
	}
}

// TestPreflight: TestConnection reads the whole list, reports how it is
// complete and the server's total beside what the credential read, and
// that write access is not checked.
func TestPreflight(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	g.PageCap(3)
	seed(g, "p-1", 7)
	ip := configured(t, g, func(s map[string]any) { offsetPaged(3)(s); s["total_path"] = "encounterCount" }, map[string]string{"patient_id": "p-1"})
	res, err := ip.TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}
	for _, w := range []string{"read 7 records in 4 page(s)", "complete by pagination: offset paging ($offset/$limit, 3 per page",
		"reports a total of 7, and this credential read 7", "can also write is not checked"} {
		if !strings.Contains(res.Message, w) {
			t.Errorf("message %q lacks %q", res.Message, w)
		}
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "first page is full (3 records") {
		t.Errorf("warnings %q; want the full first page", res.Warnings)
	}
}

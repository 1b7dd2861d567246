package rest

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

// cappedPath is a Frappe list that asks for no page length: the server
// answers its default page (DefaultPage), as most list endpoints do.
const cappedPath = `/api/resource/Patient%20Encounter?fields=["*"]&filters=[["patient","=","{patient}"]]&order_by=creation%20asc`

// TestCompletenessRefusals: a section must say how its read is complete,
// in one way, and the refusal names both options and why.
func TestCompletenessRefusals(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	secrets := map[string]string{"auth.value_env": f.Token()}
	params := map[string]string{"patient_id": "PAT-1"}
	offset := map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 50}
	tests := []struct {
		name     string
		edit     func(map[string]any)
		wantPath string
		wantMsg  []string
	}{
		{"neither pagination nor single_response", func(s map[string]any) { delete(s, "single_response") }, "pagination",
			[]string{"pagination: {...}", "single_response: true", "max_records", "cap"}},
		{"single_response false", func(s map[string]any) { s["single_response"] = false }, "pagination", []string{"single_response: true"}},
		{"max_records with pagination", func(s map[string]any) {
			s["records_path"] = cappedPath
			s["pagination"] = offset
			s["max_records"] = 10 // kept: max_records needs single_response
		}, "max_records", []string{"single_response only"}},
		{"total_path and total_header", func(s map[string]any) { s["total_path"] = "total_count"; s["total_header"] = "X-Total-Count" }, "total_header", []string{"choose total_path"}},
		{"bad total_path", func(s map[string]any) { s["total_path"] = "meta..count" }, "total_path", []string{"empty"}},
		{"bad total_header", func(s map[string]any) { s["total_header"] = "X Total" }, "total_header", []string{"not an HTTP header name"}},
		{"max_records zero", func(s map[string]any) { s["max_records"] = 0 }, "max_records", []string{"whole number"}},
		{"malformed field path", func(s map[string]any) {
			s["field_paths"] = map[string]any{"name": "name", "claim_no": "custom_fields[id=1.value"}
		}, "field_paths.claim_no", []string{"not closed"}},
		{"selector without value", func(s map[string]any) {
			s["field_paths"] = map[string]any{"claim_no": "custom_fields[id=].value"}
		}, "field_paths.claim_no", []string{"name=value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), request(t, frappeSection(f, tt.edit), params, secrets))
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
	// pagination and single_response together: frappeSection drops
	// single_response from a paged section, so build this one by hand.
	sec := frappeSection(f, func(s map[string]any) { s["records_path"] = cappedPath; s["pagination"] = offset })
	sec["single_response"] = true
	var ce *refusal.Error
	if err := inProcess(t).Configure(t.Context(), request(t, sec, params, secrets)); !errors.As(err, &ce) || ce.Path != "single_response" || !strings.Contains(ce.Message, "choose one") {
		t.Fatalf("Configure with both = %v; want single_response refused", err)
	}
}

// TestDoubleSubmitUnderCap is the truncation case: a server that answers
// 100 records unless asked for more, 99 existing records, and a double
// submit (101). Declared single_response with max_records 100, the after
// read holds 100 records and is READ_MAY_BE_TRUNCATED, so the double
// submit is not CONFIRMED; an honest save (100 records, also full) is not
// CONFIRMED either, and 98 existing plus an honest save (99) is.
func TestDoubleSubmitUnderCap(t *testing.T) {
	t.Parallel()
	const effect = `{kind: record_written, match: {patient: {param: patient_id}}, count_new_only: true, expected_count: 1}`
	params := map[string]string{"patient_id": "PAT-1"}
	tests := []struct {
		name      string
		existing  int
		writes    int
		edit      func(map[string]any)
		want      string
		wantCode  string
		wantAfter int
	}{
		{"double submit, max_records", 99, 2, func(s map[string]any) { s["max_records"] = 100 },
			"INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED", sdk.CodeReadMayBeTruncated, 0},
		{"honest save filling the page, max_records", 99, 1, func(s map[string]any) { s["max_records"] = 100 },
			"INDETERMINATE/indeterminate/READ_MAY_BE_TRUNCATED", sdk.CodeReadMayBeTruncated, 0},
		{"honest save under the cap, max_records", 98, 1, func(s map[string]any) { s["max_records"] = 100 },
			"CONFIRMED/confirmed/COUNT_EXACT", "", 99},
		{"double submit, total in the body", 99, 2, func(s map[string]any) { s["total_path"] = "total_count" },
			"INDETERMINATE/indeterminate/READ_INCOMPLETE", sdk.CodeReadIncomplete, 0},
		{"double submit, total in a header", 99, 2, func(s map[string]any) { s["total_header"] = "x-total-count" },
			"INDETERMINATE/indeterminate/READ_INCOMPLETE", sdk.CodeReadIncomplete, 0},
		{"double submit, paged", 99, 2, func(s map[string]any) {
			s["pagination"] = map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 500}
			s["total_header"] = "X-Total-Count"
		}, "REFUTED/conflicting/COUNT_OVER", "", 101},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFrappe(t, true)
			f.DefaultPage(100)
			f.PageCap(100) // and never more than 100, whatever is asked
			for i := range tt.existing {
				f.Insert(doctype, encounter("PAT-1", "Triage", fmt.Sprint("old ", i)))
			}
			sec := frappeSection(f, func(s map[string]any) {
				s["records_path"] = cappedPath
				tt.edit(s)
			})
			ip := configured(t, request(t, sec, params, map[string]string{"auth.value_env": f.Token()}))
			before := mustRead(t, ip, false)
			if !before.Reachable || len(before.Records) != tt.existing {
				t.Fatalf("before: %d records, reachable %v (%s); want %d", len(before.Records), before.Reachable, before.Reason, tt.existing)
			}
			for range tt.writes {
				f.Post(t, doctype, encounter("PAT-1", "Triage", "new"))
			}
			after := mustRead(t, ip, true)
			if after.Code != tt.wantCode || len(after.Records) != tt.wantAfter {
				t.Fatalf("after: code %q, %d records (%s); want code %q, %d records", after.Code, len(after.Records), after.Reason, tt.wantCode, tt.wantAfter)
			}
			if got := httprecords.Judge(t, effect, params, before, after, ""); got != tt.want {
				t.Errorf("verdict %s, want %s (reason %q)", got, tt.want, after.Reason)
			}
		})
	}
}

// TestTotalMismatchPaged: a declared total the pages do not reach is
// READ_INCOMPLETE, and a declared total that is absent from the answer
// too.
func TestTotalMismatchPaged(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	for i := range 5 {
		f.Insert(doctype, encounter("PAT-1", "Triage", fmt.Sprint(i)))
	}
	read := func(edit func(map[string]any)) httprecords.Read {
		sec := frappeSection(f, func(s map[string]any) {
			s["records_path"] = cappedPath
			s["pagination"] = map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 2}
			edit(s)
		})
		return mustRead(t, configured(t, request(t, sec, map[string]string{"patient_id": "PAT-1"}, map[string]string{"auth.value_env": f.Token()})), true)
	}
	if got := read(func(s map[string]any) { s["total_path"] = "total_count" }); !got.Reachable || len(got.Records) != 5 {
		t.Fatalf("a matching total: %+v", got)
	}
	// The server's total counts a record this read cannot reach (max_pages
	// stops it first).
	got := read(func(s map[string]any) {
		s["total_path"] = "total_count"
		s["pagination"].(map[string]any)["max_pages"] = 2
	})
	if got.Reachable || got.Code != sdk.CodeReadIncomplete || !strings.Contains(got.Reason, "more than 2 pages") {
		t.Fatalf("past max_pages: %+v; want READ_INCOMPLETE", got)
	}
	got = read(func(s map[string]any) { s["total_path"] = "meta.filter_count" })
	if got.Reachable || got.Code != sdk.CodeReadIncomplete || !strings.Contains(got.Reason, "no total at total_path meta.filter_count") {
		t.Fatalf("no total where declared: %+v; want READ_INCOMPLETE naming the path", got)
	}
}

// TestFieldPathsNested: field_paths flatten nested records (an object's
// field, an element of an array of objects selected by its id) so nested
// values are selectors and read-backs.
func TestFieldPathsNested(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	issue := func(claim, amount string) map[string]any {
		return map[string]any{
			"patient": "PAT-1",
			"project": map[string]any{"id": 3, "name": "Loans"},
			"custom_fields": []any{
				map[string]any{"id": 2, "name": "Amount", "value": amount},
				map[string]any{"id": 1, "name": "Claim", "value": claim},
			},
		}
	}
	f.Insert(doctype, issue("C-OLD", "1.00"))
	sec := frappeSection(f, func(s map[string]any) {
		s["records_path"] = `/api/resource/Patient%20Encounter?fields=["*"]&filters=[["patient","=","{patient}"]]&limit_page_length=0`
		s["field_paths"] = map[string]any{"name": "name", "claim_no": "custom_fields[id=1].value", "amount": "custom_fields[name=Amount].value", "project": "project.name"}
	})
	params := map[string]string{"patient_id": "PAT-1", "claim": "C-7"}
	ip := configured(t, request(t, sec, params, map[string]string{"auth.value_env": f.Token()}))
	before := mustRead(t, ip, false)
	name := f.Post(t, doctype, issue("C-7", "1234.50"))
	after := mustRead(t, ip, true)
	if !after.Reachable || len(after.Records) != 2 {
		t.Fatalf("after: %+v", after)
	}
	for _, r := range after.Records {
		if r["name"] == name && (r["claim_no"] != "C-7" || r["amount"] != "1234.50" || r["project"] != "Loans" || len(r) != 4) {
			t.Errorf("record %v; want name, claim_no C-7, amount 1234.50, project Loans", r)
		}
	}
	if got := httprecords.Judge(t, `{kind: record_written, match: {claim_no: {param: claim}, project: Loans}, count_new_only: true, expected_count: 1}`, params, before, after, ""); got != "CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("record_written on a nested selector: %s", got)
	}
	if got := httprecords.Judge(t, `{kind: field_equals, match: {claim_no: {param: claim}}, field: amount, value: "1234.50"}`, params, before, after, ""); got != "CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("field_equals on a nested value: %s", got)
	}
}

// TestPreflightReportsCompleteness: TestConnection reads the whole list as
// a capture would and reports how it is complete, the server's total
// beside the records this credential read, a full page, and that write
// access is not checked.
func TestPreflightReportsCompleteness(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	f.DefaultPage(100)
	for i := range 100 {
		f.Insert(doctype, encounter("PAT-1", "Triage", fmt.Sprint(i)))
	}
	params := map[string]string{"patient_id": "PAT-1"}
	secrets := map[string]string{"auth.value_env": f.Token()}

	sec := frappeSection(f, func(s map[string]any) {
		s["records_path"] = cappedPath
		s["max_records"] = 100
		s["total_path"] = "total_count"
	})
	res, err := configured(t, request(t, sec, params, secrets)).TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}
	for _, w := range []string{"complete by single_response", "100 or more records are not judged", "checked against total_path total_count",
		"reports a total of 100, and this credential read 100", "can also write is not checked"} {
		if !strings.Contains(res.Message, w) {
			t.Errorf("message %q lacks %q", res.Message, w)
		}
	}
	if !hasWarning(res.Warnings, "READ_MAY_BE_TRUNCATED") {
		t.Errorf("warnings %q; want the full response named", res.Warnings)
	}

	sec = frappeSection(f, func(s map[string]any) {
		s["records_path"] = cappedPath
		s["pagination"] = map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 40}
		s["total_header"] = "X-Total-Count"
	})
	start := time.Now()
	res, err = configured(t, request(t, sec, params, secrets)).TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}
	for _, w := range []string{"read 100 records in 4 page(s)", "complete by pagination: offset paging (limit_start/limit_page_length, 40 per page", "X-Total-Count"} {
		if !strings.Contains(res.Message, w) {
			t.Errorf("message %q lacks %q", res.Message, w)
		}
	}
	if !hasWarning(res.Warnings, "first page is full (40 records") {
		t.Errorf("warnings %q; want the full first page", res.Warnings)
	}
	if res.Latency <= 0 || res.Latency > time.Since(start) {
		t.Errorf("latency %v", res.Latency)
	}
}

func hasWarning(ws []string, part string) bool {
	for _, w := range ws {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pagesOf is a fetch answering pages of n records each in turn (more while
// pages remain), with body and header on every page; it fails with why at
// failAt (1-based; 0: never).
func pagesOf(sizes []int, body any, header http.Header, failAt int, why string) func(context.Context) (Page, string) {
	calls := 0
	return func(context.Context) (Page, string) {
		calls++
		if calls == failAt {
			return Page{}, why
		}
		recs := make([]sdk.Record, sizes[calls-1])
		for i := range recs {
			recs[i] = sdk.Record{"n": json.Number("1")}
		}
		return Page{Records: recs, More: calls < len(sizes), Body: body, Header: header}, ""
	}
}

func mustComplete(t *testing.T, c CompletenessConfig, paging string, pageSize, maxPages int) Completeness {
	t.Helper()
	got, err := ParseCompleteness(c, paging, pageSize, maxPages, "pagination.max_pages")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestParseCompletenessRefusals(t *testing.T) {
	t.Parallel()
	yes, no, zero := true, false, 0
	for _, tt := range []struct {
		name     string
		c        CompletenessConfig
		paging   string
		wantPath string
	}{
		{"neither", CompletenessConfig{}, "", "pagination"},
		{"single_response false", CompletenessConfig{SingleResponse: &no}, "", "pagination"},
		{"both", CompletenessConfig{SingleResponse: &yes}, "offset paging", "single_response"},
		{"max_records when paged", CompletenessConfig{MaxRecords: &zero}, "offset paging", "max_records"},
		{"max_records zero", CompletenessConfig{SingleResponse: &yes, MaxRecords: &zero}, "", "max_records"},
		{"two totals", CompletenessConfig{SingleResponse: &yes, TotalPath: "a", TotalHeader: "X-Total"}, "", "total_header"},
		{"bad header", CompletenessConfig{SingleResponse: &yes, TotalHeader: "X:Total"}, "", "total_header"},
	} {
		_, err := ParseCompleteness(tt.c, tt.paging, 0, 1, "max_pages")
		var ce *refusal.Error
		if !errors.As(err, &ce) || ce.Path != tt.wantPath {
			t.Errorf("%s: %v; want a refusal at %s", tt.name, err, tt.wantPath)
		}
	}
}

func TestReadAll(t *testing.T) {
	t.Parallel()
	yes, hundred := true, 100
	body := map[string]any{"meta": map[string]any{"filter_count": json.Number("7")}, "total": "5"}
	header := http.Header{"X-Total-Count": []string{"6"}}
	paged := func(c CompletenessConfig) Completeness { return mustComplete(t, c, "offset paging", 3, 3) }
	single := func(c CompletenessConfig) Completeness {
		c.SingleResponse = &yes
		return mustComplete(t, c, "", 0, 1)
	}
	for _, tt := range []struct {
		name     string
		c        Completeness
		sizes    []int
		failAt   int
		wantN    int
		wantCode string
		wantWhy  string
	}{
		{"every page", paged(CompletenessConfig{}), []int{3, 3, 1}, 0, 7, "", ""},
		{"total in the body matches", paged(CompletenessConfig{TotalPath: "meta.filter_count"}), []int{3, 3, 1}, 0, 7, "", ""},
		{"total as a string", paged(CompletenessConfig{TotalPath: "total"}), []int{3, 2}, 0, 5, "", ""},
		{"total differs", paged(CompletenessConfig{TotalPath: "meta.filter_count"}), []int{3, 3}, 0, 0, sdk.CodeReadIncomplete, "declares 7 records (total_path meta.filter_count) but the read holds 6"},
		{"total header differs", paged(CompletenessConfig{TotalHeader: "x-total-count"}), []int{3, 3, 1}, 0, 0, sdk.CodeReadIncomplete, "declares 6 records (total_header X-Total-Count) but the read holds 7"},
		{"total absent", paged(CompletenessConfig{TotalPath: "meta.total"}), []int{3}, 0, 0, sdk.CodeReadIncomplete, "no total at total_path meta.total"},
		{"past max_pages", paged(CompletenessConfig{}), []int{3, 3, 3, 3}, 0, 0, sdk.CodeReadIncomplete, "more than 3 pages; raise pagination.max_pages"},
		{"a page fails", paged(CompletenessConfig{}), []int{3, 3, 1}, 2, 0, "", "503 on page 2"},
		{"single under max_records", single(CompletenessConfig{MaxRecords: &hundred}), []int{99}, 0, 99, "", ""},
		{"single at max_records", single(CompletenessConfig{MaxRecords: &hundred}), []int{100}, 0, 0, sdk.CodeReadMayBeTruncated, "holds 100 records, at least max_records (100)"},
		{"single reads one page only", single(CompletenessConfig{}), []int{2, 2}, 0, 2, "", ""},
	} {
		res := tt.c.ReadAll(t.Context(), pagesOf(tt.sizes, body, header, tt.failAt, "503 on page 2"))
		if res.Code != tt.wantCode || !strings.Contains(res.Why, tt.wantWhy) || (tt.wantWhy == "") != (res.Why == "") {
			t.Errorf("%s: code %q why %q; want code %q why %q", tt.name, res.Code, res.Why, tt.wantCode, tt.wantWhy)
			continue
		}
		capt := tt.c.Read(t.Context(), 0, pagesOf(tt.sizes, body, header, tt.failAt, "503 on page 2"))
		n := 0
		if capt.Records != nil {
			for _, err := range capt.Records {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		if capt.Reachable != (tt.wantWhy == "") || capt.Code != tt.wantCode || (capt.Reachable && n != tt.wantN) {
			t.Errorf("%s: capture reachable %v code %q, %d records; want %d", tt.name, capt.Reachable, capt.Code, n, tt.wantN)
		}
	}
}

// TestReadBound: a refused binding is Read's error and nothing is fetched;
// a bound read reads every page the bound value leads to.
func TestReadBound(t *testing.T) {
	t.Parallel()
	c := mustComplete(t, CompletenessConfig{}, "offset paging", 2, 5)
	refused := &refusal.Error{Path: "records_path", Message: "no value for {id}"}
	fetched := false
	_, err := ReadBound(context.Background(), &c, sdk.CaptureRequest{Params: map[string]string{}},
		func(map[string]string) (string, error) { return "", refused },
		func(string) Fetch { fetched = true; return pagesOf([]int{1}, nil, nil, 0, "") })
	if !errors.Is(err, refused) || fetched {
		t.Errorf("refused binding: err %v, fetched %v; want the refusal and no fetch", err, fetched)
	}
	var boundTo string
	capt, err := ReadBound(context.Background(), &c, sdk.CaptureRequest{Params: map[string]string{"id": "7"}},
		func(p map[string]string) (string, error) { return "/items/" + p["id"], nil },
		func(first string) Fetch { boundTo = first; return pagesOf([]int{2, 2, 1}, nil, nil, 0, "") })
	n := 0
	if capt.Records != nil {
		for _, rerr := range capt.Records {
			if rerr != nil {
				t.Fatalf("bound read: record %d: %v", n, rerr)
			}
			n++
		}
	}
	if err != nil || !capt.Reachable || n != 5 || boundTo != "/items/7" {
		t.Errorf("bound read: %+v %v, %d records (bound to %q), want 5 records read from /items/7", capt, err, n, boundTo)
	}
}

// TestPreflight: the probe reads the whole list, describes it, and keeps
// the adapter's warnings beside the read's own (a full first page); a
// failed read is unreachable with its reason.
func TestPreflight(t *testing.T) {
	t.Parallel()
	c := mustComplete(t, CompletenessConfig{}, "offset paging", 2, 5)
	describe := func(read string, firstPage int) string { return read + "; first page " + strconv.Itoa(firstPage) }
	res, err := c.Preflight(context.Background(), []string{"configured warning"}, pagesOf([]int{2, 1}, nil, nil, 0, ""), describe)
	if err != nil || !res.Reachable || !strings.Contains(res.Message, "read 3 records in 2 page(s); first page 2") {
		t.Errorf("whole read: %+v %v", res, err)
	}
	if len(res.Warnings) != 2 || res.Warnings[0] != "configured warning" || !strings.Contains(res.Warnings[1], "first page is full") {
		t.Errorf("warnings %q, want the adapter's then the full first page", res.Warnings)
	}
	res, err = c.Preflight(context.Background(), nil, pagesOf([]int{2}, nil, nil, 1, "GET /items answered 503"), describe)
	if err != nil || res.Reachable || res.Message != "GET /items answered 503" {
		t.Errorf("failed read: %+v %v, want unreachable with the reason", res, err)
	}
}

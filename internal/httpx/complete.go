package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// CompletenessConfig is the part of a list-reading section that says how a
// read is known to hold every record, beside the adapter's own pagination.
// An adapter's config struct embeds it.
type CompletenessConfig struct {
	// SingleResponse: the operator asserts that one response holds the
	// whole result (single_response).
	SingleResponse *bool `json:"single_response"`
	// MaxRecords is the most records the server answers at once
	// (max_records); a single response holding as many is not judged.
	MaxRecords *int `json:"max_records"`
	// TotalPath is a dotted path in the response body to the number of
	// records the server says the read selects (total_path).
	TotalPath string `json:"total_path"`
	// TotalHeader is a response header holding that number (total_header).
	TotalHeader string `json:"total_header"`
}

// Completeness is how one configured read proves it is whole.
type Completeness struct {
	// Paging describes the adapter's pagination ("" without it), e.g.
	// "offset paging (limit_start/limit_page_length, 500 per page)".
	Paging string
	// PageSize is the number of records a full page holds, 0 when unknown.
	PageSize int
	// MaxPages bounds the pages followed; MaxPagesKey is the option that
	// sets it, named when the bound is hit.
	MaxPages    int
	MaxPagesKey string
	// Single is single_response; MaxRecords its max_records (0: none).
	Single     bool
	MaxRecords int
	// TotalPath and TotalHeader name where the server declares the total.
	TotalPath   Path
	TotalHeader string
	// TotalBuiltin names a total the adapter reads itself (fhir's
	// Bundle.total); the pages carry it.
	TotalBuiltin string
}

// ParseCompleteness checks a section's completeness keys. paging is the
// adapter's description of its pagination, "" when none is configured;
// pageSize and maxPages come from it (maxPages 1 without pagination).
// A read with neither pagination nor single_response is refused: a server
// that caps its answers would hide records from it unseen.
func ParseCompleteness(c CompletenessConfig, paging string, pageSize, maxPages int, maxPagesKey string) (Completeness, error) {
	out := Completeness{Paging: paging, PageSize: pageSize, MaxPages: maxPages, MaxPagesKey: maxPagesKey}
	single := c.SingleResponse != nil && *c.SingleResponse
	switch {
	case paging != "" && single:
		return out, &refusal.Error{Path: "single_response", Message: "pagination is configured too; choose one: pagination reads every page, single_response asserts that one response holds the whole list"}
	case paging == "" && !single:
		return out, &refusal.Error{Path: "pagination", Message: "missing: say how a read is known to hold every record. Either pagination: {...} to read every page, or single_response: true when one response always holds the whole list (with max_records: N, the most the server answers at once, so that a full response is not judged). Without either, a server that caps its answer (many stop at 25 or 100 records) would hide records, and a duplicate could read as one"}
	}
	if paging == "" {
		out.Single, out.MaxPages = true, 1
	}
	if c.MaxRecords != nil {
		if !single {
			return out, &refusal.Error{Path: "max_records", Message: "applies to single_response only; a paged read is bounded by max_pages"}
		}
		n, err := IntIn("max_records", c.MaxRecords, 0, 1, 100_000_000)
		if err != nil {
			return out, err
		}
		out.MaxRecords = n
	}
	switch {
	case c.TotalPath != "" && c.TotalHeader != "":
		return out, &refusal.Error{Path: "total_header", Message: "total_path is set too; the server declares its total in one place: choose total_path (in the body) or total_header"}
	case c.TotalPath != "":
		p, err := ParsePath(c.TotalPath)
		if err != nil {
			return out, &refusal.Error{Path: "total_path", Message: err.Error()}
		}
		out.TotalPath = p
	case c.TotalHeader != "":
		if !validHeaderName(c.TotalHeader) {
			return out, &refusal.Error{Path: "total_header", Message: fmt.Sprintf("%q is not an HTTP header name; write e.g. X-Total-Count", c.TotalHeader)}
		}
		out.TotalHeader = http.CanonicalHeaderKey(c.TotalHeader)
	}
	return out, nil
}

// Page is one response of a list read.
type Page struct {
	Records []sdk.Record
	// More says another page follows.
	More bool
	// Body is the decoded response body (for graphql, its data), where
	// total_path is looked up; Header its headers, for total_header.
	Body   any
	Header http.Header
	// Total is the total the adapter itself read from this page
	// (TotalBuiltin), nil when none.
	Total *int64
}

// Result is a whole read, or why it is not one.
type Result struct {
	Records []sdk.Record
	Pages   int
	// FirstPage is the number of records on the first page.
	FirstPage int
	// Total is the server's declared total, -1 when none was declared.
	Total int64
	// Why is non-empty when the read is not judged; Code is then set when
	// the server answered but the read is not whole.
	Why  string
	Code string
	// At is when the first page was asked for.
	At time.Time
}

// ReadAll reads every page with fetch (which returns why a page failed),
// then checks the read is whole: not past max_pages, not as many records
// as max_records, and as many records as a declared total.
func (c *Completeness) ReadAll(ctx context.Context, fetch func(context.Context) (Page, string)) Result {
	res := Result{Total: -1, At: time.Now()}
	for {
		pg, why := fetch(ctx)
		if why != "" {
			return Result{Total: -1, Why: why, At: res.At}
		}
		res.Pages++
		if res.Pages == 1 {
			res.FirstPage = len(pg.Records)
			total, why := c.total(pg)
			if why != "" {
				return Result{Total: -1, Why: why, Code: sdk.CodeReadIncomplete, At: res.At, Pages: 1, FirstPage: len(pg.Records)}
			}
			res.Total = total
		}
		res.Records = append(res.Records, pg.Records...)
		if c.Single || !pg.More {
			break
		}
		if res.Pages >= c.MaxPages {
			res.Why, res.Code = fmt.Sprintf("the list has more than %d pages; raise %s or narrow the read (a read cut short is never judged)", c.MaxPages, c.MaxPagesKey), sdk.CodeReadIncomplete
			return res
		}
	}
	n := int64(len(res.Records))
	switch {
	case c.Single && c.MaxRecords > 0 && n >= int64(c.MaxRecords):
		res.Why, res.Code = fmt.Sprintf("the response holds %d records, at least max_records (%d): the server may have cut the list short, so the read is not judged; page the read (pagination) or narrow it", n, c.MaxRecords), sdk.CodeReadMayBeTruncated
	case res.Total >= 0 && n != res.Total:
		res.Why, res.Code = fmt.Sprintf("the server declares %d records (%s) but the read holds %d: the read is not whole (or the list changed while it was read), so it is not judged", res.Total, c.totalWhere(), n), sdk.CodeReadIncomplete
	}
	return res
}

// Fetch reads the next page of a read: the page, or why the read failed.
type Fetch = func(context.Context) (Page, string)

// ReadBound is a paged adapter's Read: it binds the call's run parameters
// with bind (a refusal is the error, before anything is read), then reads
// every page that pages fetches from the bound value, as Read does, within
// the capture's timeout.
func ReadBound[B any](ctx context.Context, c *Completeness, req sdk.CaptureRequest, bind func(params map[string]string) (B, error), pages func(bound B) Fetch) (sdk.Capture, error) {
	bound, err := bind(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	return c.Read(ctx, req.Timeout, pages(bound)), nil
}

// Read is ReadAll as a capture, bounded by timeout: every page is read
// before the capture answers, so a read that fails or is not whole is an
// unreachable capture (with sdk.Capture.Code when the server answered but
// the read is not whole), never a partial read set.
func (c *Completeness) Read(ctx context.Context, timeout time.Duration, fetch func(context.Context) (Page, string)) sdk.Capture {
	ctx, cancel := WithTimeout(ctx, timeout)
	defer cancel()
	res := c.ReadAll(ctx, fetch)
	if res.Why != "" {
		capt := sdk.Incomplete(res.Code, "%s", res.Why)
		capt.At = res.At
		return capt
	}
	return sdk.Capture{Reachable: true, At: res.At, Records: sdk.Records(res.Records...)}
}

// total reads the declared total of the first page, -1 when none is
// declared.
func (c *Completeness) total(pg Page) (int64, string) {
	switch {
	case c.TotalPath != nil:
		v, found := c.TotalPath.Lookup(pg.Body)
		if found != Present {
			return -1, fmt.Sprintf("the response has no total at total_path %s, so the read cannot be shown whole", c.TotalPath)
		}
		return count(v, "total_path "+c.TotalPath.String())
	case c.TotalHeader != "":
		h := pg.Header.Get(c.TotalHeader)
		if h == "" {
			return -1, fmt.Sprintf("the response has no %s header (total_header), so the read cannot be shown whole", c.TotalHeader)
		}
		return count(strings.TrimSpace(h), "total_header "+c.TotalHeader)
	case pg.Total != nil:
		return *pg.Total, ""
	}
	return -1, ""
}

// count reads a total: a whole number, or a string of digits.
func count(v any, where string) (int64, string) {
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = x
	default:
		return -1, fmt.Sprintf("%s holds %s, not a count", where, KindOf(v))
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return -1, fmt.Sprintf("%s holds %q, not a count", where, Clip(text, 40))
	}
	return n, ""
}

func (c *Completeness) totalWhere() string {
	switch {
	case c.TotalPath != nil:
		return "total_path " + c.TotalPath.String()
	case c.TotalHeader != "":
		return "total_header " + c.TotalHeader
	case c.TotalBuiltin != "":
		return c.TotalBuiltin
	}
	return "total"
}

// Describe says how the read is complete, for preflight.
func (c *Completeness) Describe() string {
	var how string
	if c.Single {
		how = "complete by single_response (one response holds the whole list"
		if c.MaxRecords > 0 {
			how += fmt.Sprintf("; %d or more records are not judged", c.MaxRecords)
		}
		how += ")"
	} else {
		how = fmt.Sprintf("complete by pagination: %s, at most %d pages", c.Paging, c.MaxPages)
	}
	if c.TotalPath != nil || c.TotalHeader != "" || c.TotalBuiltin != "" {
		how += "; the record count is checked against " + c.totalWhere()
	}
	return how
}

// Probe is the preflight of a paged read: it reads the whole list with
// fetch, as a capture would, and returns why it could not (a refused or
// failed read: unreachable), or a summary and warnings. describe writes
// the summary from Report's account of the read and the size of the first
// page; a read that is not whole is a warning, as it would be judged
// INDETERMINATE. It is the body of a ProbeRead.
func (c *Completeness) Probe(ctx context.Context, fetch func(context.Context) (Page, string), describe func(read string, firstPage int) string) (why, summary string, warnings []string) {
	res := c.ReadAll(ctx, fetch)
	if res.Why != "" && res.Code == "" {
		return res.Why, "", nil
	}
	read, warnings := c.Report(res)
	if res.Code != "" {
		warnings = append(warnings, "the read is not whole and would be judged INDETERMINATE ("+res.Code+"): "+res.Why)
	}
	return "", describe(read, res.FirstPage), warnings
}

// Preflight is a paged adapter's TestConnection probe: ProbeRead of Probe,
// which reads the whole list with fetch and describes it with describe,
// beside the adapter's configuration warnings. Its error is always nil, so
// that it is the probe a Binding's Test runs.
func (c *Completeness) Preflight(ctx context.Context, warnings []string, fetch Fetch, describe func(read string, firstPage int) string) (sdk.TestResult, error) {
	return ProbeRead(ctx, warnings, func(ctx context.Context) (string, string, []string) {
		return c.Probe(ctx, fetch, describe)
	}), nil
}

// Report describes a whole read for preflight, with warnings: a full first
// page, single_response without max_records, a declared total that differs
// from the records read. The credential's visible count is stated beside
// the server's total.
func (c *Completeness) Report(res Result) (string, []string) {
	var warnings []string
	msg := fmt.Sprintf("read %d records in %d page(s)", len(res.Records), res.Pages)
	if res.Why != "" {
		msg = fmt.Sprintf("the read is not whole (%s): %s", res.Code, res.Why)
	}
	if res.Total >= 0 {
		msg += fmt.Sprintf("; the server reports a total of %d, and this credential read %d of them (it must see every record the automation could create: private ones, other states, soft-deleted rows)", res.Total, len(res.Records))
		if res.Why == "" && int64(len(res.Records)) != res.Total {
			warnings = append(warnings, fmt.Sprintf("the declared total (%d) differs from the records read (%d)", res.Total, len(res.Records)))
		}
	}
	switch {
	case c.Single && c.MaxRecords == 0:
		warnings = append(warnings, "single_response without max_records: a server that caps its answers would cut the read short unseen; declare max_records (the most records one response holds)")
	case c.Single && res.FirstPage >= c.MaxRecords:
		warnings = append(warnings, fmt.Sprintf("the response is full (%d records, max_records %d): it is judged INDETERMINATE (READ_MAY_BE_TRUNCATED); page the read or narrow it", res.FirstPage, c.MaxRecords))
	case !c.Single && c.PageSize > 0 && res.FirstPage >= c.PageSize:
		warnings = append(warnings, fmt.Sprintf("the first page is full (%d records, the page size): the read spans several pages (%d read here); check the server honours the page size, and that max_pages (%d) leaves room for growth", res.FirstPage, res.Pages, c.MaxPages))
	}
	return msg, warnings
}

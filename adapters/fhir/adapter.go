package fhir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// config is the section as written.
type config struct {
	httpx.Endpoint
	ResourceType     string                     `json:"resource_type"`
	SearchParams     map[string]json.RawMessage `json:"search_params"`
	SearchParamExprs map[string]json.RawMessage `json:"search_param_exprs"`
	FieldPaths       map[string]string          `json:"field_paths"`
	AccessTokenEnv   *string                    `json:"access_token_env"`
	MaxPages         *int                       `json:"max_pages"`
}

var resourceTypeRE = regexp.MustCompile(`^[A-Z][A-Za-z]{1,63}$`)

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	// Binding binds a call's run parameters into the search (firstURL),
	// and answers CheckParams with it.
	sdk.Binding[*url.URL]
	base     *url.URL
	search   url.Values   // search_params
	exprs    param.Values // search_param_exprs, bound per call
	typ      string
	fields   httpx.FieldPaths
	maxPages int
	complete httpx.Completeness
	client   *http.Client
	creds    httpx.Credentials
	warnings []string
}

// New returns an unconfigured fhir adapter, which reads FHIR R4 resources
// with one search; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks the section and search_param_exprs and builds the HTTP
// client. It does not connect; each call binds its run parameters into the
// search.
func configure(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	s := &settings{typ: cfg.ResourceType}
	s.Binding = s.firstURL
	var err error
	if s.base, err = cfg.URL(); err != nil {
		return nil, err
	}
	if !resourceTypeRE.MatchString(s.typ) {
		return nil, &refusal.Error{Path: "resource_type", Message: fmt.Sprintf("write a FHIR resource type such as Observation or Patient, not %q", s.typ)}
	}
	if s.search, s.exprs, err = parseSearch(cfg); err != nil {
		return nil, err
	}
	if s.fields, err = httpx.ParseFieldPaths("field_paths", cfg.FieldPaths); err != nil {
		return nil, err
	}
	if _, hasID := s.fields["id"]; s.fields != nil && !hasID {
		s.warnings = append(s.warnings, "field_paths maps no id: records are then identified by their whole content, so two identical resources count as one identity; add id: id")
	}
	if s.maxPages, err = httpx.MaxPages("max_pages", cfg.MaxPages); err != nil {
		return nil, err
	}
	// A search follows Bundle.link[next] to the last page and checks the
	// count of matches against Bundle.total when the server sends one.
	s.complete = httpx.Completeness{Paging: "Bundle next links", MaxPages: s.maxPages, MaxPagesKey: "max_pages", TotalBuiltin: "Bundle.total"}
	if cfg.AccessTokenEnv != nil {
		tok, err := httpx.Secret("access_token_env", *cfg.AccessTokenEnv, req.Secrets)
		if err != nil {
			return nil, err
		}
		s.creds = httpx.Bearer(tok)
	}
	var more []string
	if s.client, more, err = cfg.Client(s.base, s.creds); err != nil {
		return nil, err
	}
	s.warnings = append(s.warnings, more...)
	return s, nil
}

// parseSearch reads search_params (literal strings, or lists of strings for
// a repeated parameter) and search_param_exprs (value expressions, bound
// per call).
func parseSearch(cfg config) (url.Values, param.Values, error) {
	q := url.Values{}
	for name, v := range cfg.SearchParams {
		var one string
		var many []string
		switch {
		case json.Unmarshal(v, &one) == nil:
			q.Add(name, one)
		case json.Unmarshal(v, &many) == nil && len(many) > 0:
			for _, x := range many {
				q.Add(name, x)
			}
		default:
			return nil, param.Values{}, &refusal.Error{Path: "search_params." + name, Message: `must be a string or a list of strings; numbers are written as strings ("10")`}
		}
	}
	exprs, err := httpx.Values("search_param_exprs", cfg.SearchParamExprs)
	if err != nil {
		return nil, param.Values{}, err
	}
	for _, name := range exprs.Names() {
		if _, dup := q[name]; dup {
			return nil, param.Values{}, &refusal.Error{Path: "search_param_exprs." + name, Message: "also set under search_params; set it in one place"}
		}
		if name == "" || strings.ContainsAny(name, "&=#? ") {
			return nil, param.Values{}, &refusal.Error{Path: "search_params", Message: fmt.Sprintf("%q is not a search parameter name", name)}
		}
	}
	for name := range q {
		if name == "" || strings.ContainsAny(name, "&=#? ") {
			return nil, param.Values{}, &refusal.Error{Path: "search_params", Message: fmt.Sprintf("%q is not a search parameter name", name)}
		}
	}
	return q, exprs, nil
}

// firstURL binds one call's run parameters into the search and returns the
// first page's URL.
func (s *settings) firstURL(params map[string]string) (*url.URL, error) {
	bound, err := s.exprs.BindWith(params, searchValue)
	if err != nil {
		return nil, err
	}
	if err := checkSearchParams(s.exprs, bound); err != nil {
		return nil, err
	}
	q := maps.Clone(s.search)
	for _, name := range slices.Sorted(maps.Keys(bound)) {
		q.Set(name, bound[name])
	}
	u := s.base.JoinPath(s.typ)
	u.RawQuery = q.Encode()
	return u, nil
}

// searchValue is the place of a run parameter in a FHIR search value, alone
// or composed by a template ({template: "Patient/{patient_ref}"}): control
// characters are refused, and so is a comma, which FHIR search reads as OR
// between values (patient=a,b reads both patients). url.Values
// query-escapes the whole value, so none can add a parameter.
func searchValue(v string) (string, error) {
	if _, err := param.QueryValue(v); err != nil {
		return "", err
	}
	if strings.Contains(v, ",") {
		return "", errors.New("holds a comma, which FHIR search reads as OR between values; a run parameter binds exactly one value")
	}
	return v, nil
}

// checkSearchParams refuses a run parameter that would widen the search.
// url.Values query-escapes every value, so none can add a parameter; but a
// comma inside a FHIR search value means OR (patient=a,b reads both
// patients), so a value bound from a run parameter may not hold one. A
// literal written by the operator may.
func checkSearchParams(exprs param.Values, bound map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(bound)) {
		path := "search_param_exprs." + name
		v, ok := exprs.Get(name)
		if !ok || !v.IsParam() {
			continue
		}
		value := bound[name]
		if _, err := param.QueryValue(value); err != nil {
			return &refusal.Error{Path: path, Message: fmt.Sprintf("run parameter %q %v", v.Param, err)}
		}
		if strings.Contains(value, ",") {
			return &refusal.Error{Path: path, Message: fmt.Sprintf("run parameter %q holds a comma, which FHIR search reads as OR between values; a run parameter binds exactly one value", v.Param)}
		}
	}
	return nil
}

// TestConnection runs the search's first page and reports what came back.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return s.Test(ctx, req, s.probe)
}

// probe reads the search's first page at first.
func (s *settings) probe(ctx context.Context, first *url.URL) (sdk.TestResult, error) {
	return s.complete.Preflight(ctx, s.warnings, s.reader(first).page, func(read string, firstPage int) string {
		return fmt.Sprintf("%s answered a searchset Bundle of %s using %s: %s (%d on the first page); %s; records are %s",
			httpx.Target(http.MethodGet, first), s.typ, s.creds.Scheme(), read, firstPage, s.complete.Describe(), s.fields)
	})
}

// Read reads every Bundle of the search before answering, so that a
// refused or failed search, more pages than max_pages, or a count of
// matches that disagrees with the first Bundle's total is an unreachable
// capture (the last two with sdk.CodeReadIncomplete), never a partial
// result.
//
// A field a contract reads that holds a list fails the read too
// (listsInReadFields).
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	c, err := httpx.ReadBound(ctx, &s.complete, req, s.firstURL, func(first *url.URL) httpx.Fetch { return s.reader(first).page })
	return listsInReadFields(c, req), err
}

// page reads the next Bundle as a page of the read; its total is
// Bundle.total.
func (r *reader) page(ctx context.Context) (httpx.Page, string) {
	pg, why := r.fetch(ctx)
	if why != "" {
		return httpx.Page{}, why
	}
	out := httpx.Page{Records: pg.records, More: pg.next != nil}
	if pg.total >= 0 {
		out.Total = &pg.total
	}
	return out, ""
}

// reader follows one search's pages.
type reader struct {
	s     *settings
	next  *url.URL
	pages int
}

func (s *settings) reader(first *url.URL) *reader { return &reader{s: s, next: first} }

// page is one searchset Bundle, read.
type page struct {
	records []sdk.Record
	matches int      // entries of mode match (or no mode) of the searched type
	total   int64    // Bundle.total, -1 when absent
	next    *url.URL // link[relation=next], nil on the last page
}

// bundle is the part of a Bundle (or OperationOutcome) the adapter reads.
type bundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        *json.Number
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
		Search   struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
	Issue []issue `json:"issue"`
}

type issue struct {
	Severity    string `json:"severity"`
	Code        string `json:"code"`
	Diagnostics string `json:"diagnostics"`
	Details     struct {
		Text string `json:"text"`
	} `json:"details"`
}

// fetch reads the next Bundle. why is non-empty when the read failed.
func (r *reader) fetch(ctx context.Context) (page, string) {
	s := r.s
	r.pages++
	u := r.next
	what := httpx.Target(http.MethodGet, u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return page{}, fmt.Sprintf("%s: %v", what, err)
	}
	req.Header.Set("Accept", "application/fhir+json")
	s.creds.Set(req.Header)
	res, err := httpx.Do(s.client, req)
	if err != nil {
		return page{}, httpx.TransportFailure(ctx, what, err, s.creds)
	}
	var b bundle
	jsonErr := json.Unmarshal(res.Body, &b)
	if res.Status < 200 || res.Status > 299 {
		if jsonErr == nil && b.ResourceType == "OperationOutcome" {
			return page{}, fmt.Sprintf("%s answered %d %s with an OperationOutcome: %s", what, res.Status, http.StatusText(res.Status), s.outcome(b.Issue))
		}
		return page{}, httpx.StatusFailure(what, res, s.creds)
	}
	switch {
	case jsonErr != nil:
		return page{}, fmt.Sprintf("%s answered %d with a body that is not a FHIR resource (%v): %s", what, res.Status, jsonErr, httpx.Excerpt(res.Body, s.creds))
	case b.ResourceType == "OperationOutcome":
		return page{}, fmt.Sprintf("%s answered an OperationOutcome instead of a Bundle: %s", what, s.outcome(b.Issue))
	case b.ResourceType != "Bundle" || b.Type != "searchset":
		return page{}, fmt.Sprintf("%s answered a %s %s, not a searchset Bundle: %s", what, orNone(b.Type), orNone(b.ResourceType), httpx.Excerpt(res.Body, s.creds))
	}
	pg := page{total: -1}
	if b.Total != nil {
		n, err := b.Total.Int64()
		if err != nil || n < 0 {
			return page{}, fmt.Sprintf("%s: Bundle.total %q is not a count", what, b.Total.String())
		}
		pg.total = n
	}
	for i, e := range b.Entry {
		v, err := httpx.DecodeJSON(e.Resource)
		res, ok := v.(map[string]any)
		if err != nil || !ok {
			return page{}, fmt.Sprintf("%s: entry %d has no resource object", what, i)
		}
		switch e.Search.Mode {
		case "outcome":
			if why := s.outcomeEntry(ctx, e.Resource); why != "" {
				return page{}, fmt.Sprintf("%s: the searchset carries an OperationOutcome: %s", what, why)
			}
			continue
		case "include":
			continue
		}
		if rt, _ := res["resourceType"].(string); rt != s.typ {
			continue // included without a search mode
		}
		s.relativeReferences(res)
		rec, err := s.fields.Flatten(res)
		if err != nil {
			return page{}, fmt.Sprintf("%s: entry %d: %v", what, i, err)
		}
		pg.matches++
		pg.records = append(pg.records, rec)
	}
	for _, l := range b.Link {
		if l.Relation != "next" || l.URL == "" {
			continue
		}
		next, err := httpx.Follow(s.base, u, l.URL)
		if err != nil {
			return page{}, fmt.Sprintf("%s: %v", what, err)
		}
		pg.next = next
		r.next = next
	}
	sdk.Logger(ctx).Debug("read a searchset page", "page", r.pages, "matches", pg.matches, "next", pg.next != nil)
	return pg, ""
}

// outcomeEntry returns why an outcome entry fails the read (an error or
// fatal issue), or "" for warnings and information, which are logged.
func (s *settings) outcomeEntry(ctx context.Context, raw json.RawMessage) string {
	var oo bundle
	if json.Unmarshal(raw, &oo) != nil {
		return "an outcome entry that is not an OperationOutcome"
	}
	for _, is := range oo.Issue {
		if is.Severity == "error" || is.Severity == "fatal" {
			return s.outcome(oo.Issue)
		}
	}
	sdk.Logger(ctx).Info("the searchset carries a non-fatal OperationOutcome", "issue", s.outcome(oo.Issue))
	return ""
}

// outcome summarises an OperationOutcome's issues: severity, code, and the
// details text and diagnostics, redacted and clipped.
func (s *settings) outcome(issues []issue) string {
	if len(issues) == 0 {
		return "no issues listed"
	}
	var parts []string
	for i, is := range issues {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more issues", len(issues)-3))
			break
		}
		text := strings.TrimSpace(strings.Join(nonEmpty(is.Details.Text, is.Diagnostics), " — "))
		parts = append(parts, httpx.Clip(s.creds.Redact(fmt.Sprintf("%s %s: %s", orNone(is.Severity), orNone(is.Code), text)), 200))
	}
	return strings.Join(parts, "; ")
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

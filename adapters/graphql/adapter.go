package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
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
	httpx.CompletenessConfig
	Pagination  *pagination                `json:"pagination"`
	FieldPaths  map[string]string          `json:"field_paths"`
	Query       string                     `json:"graphql_query"`
	Variables   map[string]json.RawMessage `json:"graphql_variables"`
	RecordsPath string                     `json:"graphql_records_path"`
	Auth        *httpx.Auth                `json:"auth"`
	// Refused with a pointer to the daemon's freshness_field (see configure).
	FreshnessField   any `json:"graphql_freshness_field"`
	FreshnessWindowS any `json:"graphql_freshness_window_s"`
}

// pagination is graphql's paging: offset paging (limit_variable,
// offset_variable, page_size) or Relay cursors (after_variable,
// page_info_path, optionally limit_variable and page_size).
type pagination struct {
	LimitVariable  string `json:"limit_variable"`
	OffsetVariable string `json:"offset_variable"`
	PageSize       *int   `json:"page_size"`
	AfterVariable  string `json:"after_variable"`
	PageInfoPath   string `json:"page_info_path"`
	MaxPages       *int   `json:"max_pages"`
}

// paging is the pagination Configure resolved.
type paging struct {
	limit, offset string     // variable names; limit may be "" with cursors
	size          int        // page size, 0 when not set
	after         string     // cursor variable; "" for offset paging
	pageInfo      httpx.Path // inside data, with cursors
}

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	// Binding binds a call's run parameters to the query's variables
	// (variables), and answers CheckParams with it.
	sdk.Binding[map[string]any]
	endpoint *url.URL
	query    string       // graphql_query
	rq       *readQuery   // its parse
	values   param.Values // graphql_variables, bound per call
	records  httpx.Path   // inside data
	paging   *paging      // nil without pagination
	complete httpx.Completeness
	fields   httpx.FieldPaths // nil: records are read whole
	client   *http.Client
	creds    httpx.Credentials
	warnings []string
}

// New returns an unconfigured graphql adapter, which reads records with
// one read-only GraphQL query; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// configure parses graphql_query with a GraphQL parser (refusing a
// mutation, a subscription or several operations), binds graphql_variables
// to the declared variable types and builds the HTTP client. It does not
// connect.
func configure(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	if k := "graphql_freshness_field"; cfg.FreshnessField != nil || cfg.FreshnessWindowS != nil {
		if cfg.FreshnessField == nil {
			k = "graphql_freshness_window_s"
		}
		return nil, &refusal.Error{Path: k, Message: "freshness is judged by the daemon: write freshness_field and freshness_window_s in this section instead (same meaning; the judge demotes a stale match to INDETERMINATE, class stale)"}
	}
	s := &settings{}
	s.Binding = s.variables
	var err error
	if s.endpoint, err = cfg.URL(); err != nil {
		return nil, err
	}
	rq, err := parseReadQuery(cfg.Query)
	if err != nil {
		return nil, &refusal.Error{Path: "graphql_query", Message: err.Error()}
	}
	if s.values, err = httpx.Values("graphql_variables", cfg.Variables); err != nil {
		return nil, err
	}
	if s.records, err = recordsPath(cfg.RecordsPath, rq); err != nil {
		return nil, err
	}
	maxPages, how := 1, ""
	if cfg.Pagination != nil {
		if s.paging, maxPages, how, err = parsePagination(cfg.Pagination, rq, s.values.Names()); err != nil {
			return nil, err
		}
	}
	if bad, err := rq.checkDeclared(s.values.Names()); err != nil {
		return nil, variablesError(bad, err)
	}
	s.query, s.rq = cfg.Query, rq
	size := 0
	if s.paging != nil {
		size = s.paging.size
	}
	if s.complete, err = httpx.ParseCompleteness(totalInData(cfg.CompletenessConfig, rq), how, size, maxPages, "pagination.max_pages"); err != nil {
		return nil, err
	}
	if s.fields, err = httpx.ParseFieldPaths("field_paths", cfg.FieldPaths); err != nil {
		return nil, err
	}
	if s.creds, s.client, s.warnings, err = cfg.Connect(s.endpoint, cfg.Auth, req.Secrets); err != nil {
		return nil, err
	}
	return s, nil
}

// parsePagination checks pagination against the query: its variables are
// declared, of the right type, and not bound under graphql_variables.
func parsePagination(p *pagination, rq *readQuery, bound []string) (*paging, int, string, error) {
	maxPages, err := httpx.MaxPages("pagination.max_pages", p.MaxPages)
	if err != nil {
		return nil, 0, "", err
	}
	pg := &paging{}
	variable := func(key, name string, numeric bool) (string, error) {
		if err := rq.pagingVariable("pagination."+key, name, numeric, bound); err != nil {
			return "", &refusal.Error{Path: "pagination." + key, Message: err.Error()}
		}
		return strings.TrimPrefix(name, "$"), nil
	}
	if p.LimitVariable != "" || p.PageSize != nil {
		if p.LimitVariable == "" {
			return nil, 0, "", &refusal.Error{Path: "pagination.limit_variable", Message: "missing: name the Int variable that sets the page size (e.g. limit or first)"}
		}
		if p.PageSize == nil {
			return nil, 0, "", &refusal.Error{Path: "pagination.page_size", Message: "missing: the number of records to ask for per page, e.g. 100"}
		}
		if pg.limit, err = variable("limit_variable", p.LimitVariable, true); err != nil {
			return nil, 0, "", err
		}
		if pg.size, err = httpx.IntIn("pagination.page_size", p.PageSize, 0, 1, 1_000_000); err != nil {
			return nil, 0, "", err
		}
	}
	switch {
	case p.AfterVariable != "" && p.OffsetVariable != "":
		return nil, 0, "", &refusal.Error{Path: "pagination.offset_variable", Message: "choose one paging style: offset_variable with limit_variable and page_size, or after_variable with page_info_path (Relay cursors)"}
	case p.AfterVariable != "":
		if pg.after, err = variable("after_variable", p.AfterVariable, false); err != nil {
			return nil, 0, "", err
		}
		if p.PageInfoPath == "" {
			return nil, 0, "", &refusal.Error{Path: "pagination.page_info_path", Message: "missing: the path inside data to the list's pageInfo { hasNextPage endCursor }, e.g. encounters.pageInfo"}
		}
		raw := p.PageInfoPath
		if rest, ok := strings.CutPrefix(raw, "data."); ok && !slices.Contains(rq.fields, "data") {
			raw = rest
		}
		if pg.pageInfo, err = httpx.ParsePath(raw); err != nil {
			return nil, 0, "", &refusal.Error{Path: "pagination.page_info_path", Message: err.Error()}
		}
		how := fmt.Sprintf("Relay cursors ($%s, until hasNextPage is false at %s", pg.after, pg.pageInfo)
		if pg.limit != "" {
			how += fmt.Sprintf(", $%s = %d per page", pg.limit, pg.size)
		}
		return pg, maxPages, how + ")", nil
	case p.OffsetVariable != "":
		if pg.limit == "" {
			return nil, 0, "", &refusal.Error{Path: "pagination.limit_variable", Message: "missing: offset paging needs limit_variable (the Int variable that sets the page size) and page_size"}
		}
		if pg.offset, err = variable("offset_variable", p.OffsetVariable, true); err != nil {
			return nil, 0, "", err
		}
		if p.PageInfoPath != "" {
			return nil, 0, "", &refusal.Error{Path: "pagination.page_info_path", Message: "applies to Relay cursors (after_variable); offset paging ends on an empty page"}
		}
		return pg, maxPages, fmt.Sprintf("offset paging ($%s/$%s, %d per page, until an empty page)", pg.offset, pg.limit, pg.size), nil
	}
	return nil, 0, "", &refusal.Error{Path: "pagination", Message: "name a paging style: {limit_variable, offset_variable, page_size} for offset paging, or {after_variable, page_info_path} for Relay cursors (pageInfo { hasNextPage endCursor })"}
}

// totalInData reads total_path inside data, as graphql_records_path is
// (a path written from the response's root, data.x, means the same).
func totalInData(c httpx.CompletenessConfig, rq *readQuery) httpx.CompletenessConfig {
	if rest, ok := strings.CutPrefix(c.TotalPath, "data."); ok && !slices.Contains(rq.fields, "data") {
		c.TotalPath = rest
	}
	return c
}

// recordsPath reads graphql_records_path, a dotted path inside the answer's
// data. Without it, a query selecting one top-level field reads that field.
func recordsPath(raw string, rq *readQuery) (httpx.Path, error) {
	if raw == "" {
		if len(rq.fields) != 1 {
			return nil, &refusal.Error{Path: "graphql_records_path", Message: "missing: the query selects several top-level fields; name the list of records inside data, e.g. encounters or patient.encounters"}
		}
		return httpx.Path{rq.fields[0]}, nil
	}
	// The path is inside data; a path written from the response's root
	// (data.encounters) means the same, unless the query selects a field
	// named data.
	if rest, ok := strings.CutPrefix(raw, "data."); ok && !slices.Contains(rq.fields, "data") {
		raw = rest
	}
	p, err := httpx.ParsePath(raw)
	if err != nil {
		return nil, &refusal.Error{Path: "graphql_records_path", Message: err.Error()}
	}
	if rq.fields != nil && !slices.Contains(rq.fields, p[0]) {
		return nil, &refusal.Error{Path: "graphql_records_path", Message: fmt.Sprintf("the query selects no top-level field %q (it selects %s)", p[0], strings.Join(rq.fields, ", "))}
	}
	return p, nil
}

func variablesError(bad string, err error) error {
	path := "graphql_variables"
	if bad != "" {
		path += "." + bad
	}
	return &refusal.Error{Path: path, Message: err.Error()}
}

// TestConnection runs the query once and reports what came back.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return s.Test(ctx, req, s.probe)
}

// probe runs the whole read once, as a capture would, and reports how it
// is complete.
func (s *settings) probe(ctx context.Context, vars map[string]any) (sdk.TestResult, error) {
	return s.complete.Preflight(ctx, s.warnings, s.pager(vars).fetch, func(read string, firstPage int) string {
		return fmt.Sprintf("%s answered the query with records at %s using %s: %s (%d on the first page); %s; records are %s. %s",
			httpx.Target(http.MethodPost, s.endpoint), s.records, s.creds.Scheme(), read, firstPage, s.complete.Describe(), s.fields, httpx.NoWriteCheck)
	})
}

// Read runs the query for every page before answering, bounded by the
// capture's deadline, so that a failed or incomplete read is an
// unreachable capture, never a partial list.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return httpx.ReadBound(ctx, &s.complete, req, s.variables, func(vars map[string]any) httpx.Fetch { return s.pager(vars).fetch })
}

// pager walks the pages of one read.
type pager struct {
	s      *settings
	vars   map[string]any // the bound variables
	offset int
	cursor string // "" on the first page
	seen   map[string]bool
}

func (s *settings) pager(vars map[string]any) *pager {
	return &pager{s: s, vars: vars, seen: map[string]bool{}}
}

// fetch runs the query for the next page.
func (p *pager) fetch(ctx context.Context) (httpx.Page, string) {
	s := p.s
	vars := maps.Clone(p.vars)
	if vars == nil {
		vars = map[string]any{}
	}
	if pg := s.paging; pg != nil {
		if pg.limit != "" {
			vars[pg.limit] = pg.size
		}
		if pg.offset != "" {
			vars[pg.offset] = p.offset
		}
		if pg.after != "" && p.cursor != "" {
			vars[pg.after] = p.cursor
		}
	}
	body, err := s.encode(vars)
	if err != nil {
		return httpx.Page{}, err.Error()
	}
	recs, data, why := s.read(ctx, body)
	if why != "" {
		return httpx.Page{}, why
	}
	if err := s.fields.FlattenAll(recs, "data."+s.records.String()); err != nil {
		return httpx.Page{}, err.Error()
	}
	page := httpx.Page{Records: recs, Body: data}
	pg := s.paging
	switch {
	case pg == nil:
	case pg.after != "":
		more, cursor, why := s.pageInfo(data, len(recs) == 0)
		if why != "" {
			return httpx.Page{}, why
		}
		if more && len(recs) > 0 {
			if p.seen[cursor] {
				return httpx.Page{}, fmt.Sprintf("%s: endCursor %q was answered before; the list cannot be read to its end", httpx.Target(http.MethodPost, s.endpoint), httpx.Clip(cursor, 60))
			}
			p.seen[cursor] = true
			p.cursor, page.More = cursor, true
		}
	default:
		// Only an empty page ends the list: a server that caps the page
		// size below page_size answers short pages that are not the last.
		p.offset += len(recs)
		page.More = len(recs) > 0
	}
	return page, ""
}

// pageInfo reads hasNextPage and endCursor at page_info_path. A null on
// the way is the end of the list only for a page without records (the
// entity resolved to nothing); next to records it is a failed read.
func (s *settings) pageInfo(data any, empty bool) (bool, string, string) {
	what := httpx.Target(http.MethodPost, s.endpoint)
	v, found := s.paging.pageInfo.Lookup(data)
	if found == httpx.Null && empty {
		// The entity on the way resolved to null: no records, no pages.
		return false, "", ""
	}
	info, ok := v.(map[string]any)
	if found != httpx.Present || !ok {
		return false, "", fmt.Sprintf("%s: the answer has no pageInfo object at %s; select pageInfo { hasNextPage endCursor } there", what, s.paging.pageInfo)
	}
	more, ok := info["hasNextPage"].(bool)
	if !ok {
		return false, "", fmt.Sprintf("%s: %s.hasNextPage is %s, not a boolean; select pageInfo { hasNextPage endCursor }", what, s.paging.pageInfo, httpx.KindOf(info["hasNextPage"]))
	}
	if !more {
		return false, "", ""
	}
	cursor, _ := info["endCursor"].(string)
	if cursor == "" {
		return false, "", fmt.Sprintf("%s: %s.hasNextPage is true but endCursor is %s; select pageInfo { hasNextPage endCursor }", what, s.paging.pageInfo, httpx.KindOf(info["endCursor"]))
	}
	return true, cursor, ""
}

// gqlAnswer is a GraphQL response: data, and errors when anything failed.
type gqlAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// read POSTs the query (a GraphQL read is a POST; it is the only method
// this adapter sends) and returns the records and the decoded data, or why
// there are none to judge.
func (s *settings) read(ctx context.Context, body []byte) ([]sdk.Record, any, string) {
	what := httpx.Target(http.MethodPost, s.endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	s.creds.Set(req.Header)
	res, err := httpx.Do(s.client, req)
	if err != nil {
		return nil, nil, httpx.TransportFailure(ctx, what, err, s.creds)
	}
	var ans gqlAnswer
	jsonErr := json.Unmarshal(res.Body, &ans)
	if res.Status < 200 || res.Status > 299 {
		if jsonErr == nil && len(ans.Errors) > 0 {
			return nil, nil, fmt.Sprintf("%s answered %d %s: %s", what, res.Status, http.StatusText(res.Status), s.messages(ans))
		}
		return nil, nil, httpx.StatusFailure(what, res, s.creds)
	}
	if jsonErr != nil {
		return nil, nil, fmt.Sprintf("%s answered %d with a body that is not a GraphQL response (%v): %s", what, res.Status, jsonErr, httpx.Excerpt(res.Body, s.creds))
	}
	// Partial data next to errors is still a failed read: a list that a
	// failing resolver nulled out is not "no records".
	if len(ans.Errors) > 0 {
		return nil, nil, fmt.Sprintf("%s: the GraphQL answer carries errors: %s", what, s.messages(ans))
	}
	data, err := httpx.DecodeJSON(ans.Data)
	if err != nil || data == nil {
		return nil, nil, fmt.Sprintf("%s answered %d without data: %s", what, res.Status, httpx.Excerpt(res.Body, s.creds))
	}
	v, found := s.records.Lookup(data)
	switch found {
	case httpx.Null:
		// The query resolved to null on the way (the entity has no such
		// record): an answer with no records, not a failure.
		return nil, data, ""
	case httpx.Missing:
		return nil, nil, fmt.Sprintf("%s: the answer has no %s in data: %s", what, s.records, httpx.Excerpt(ans.Data, s.creds))
	}
	recs, err := httpx.ListRecords(v, "data."+s.records.String())
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", what, err)
	}
	return recs, data, ""
}

// messages joins the first error messages, redacted and clipped.
func (s *settings) messages(ans gqlAnswer) string {
	var parts []string
	for i, e := range ans.Errors {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ans.Errors)-3))
			break
		}
		parts = append(parts, httpx.Clip(s.creds.Redact(e.Message), 160))
	}
	return strings.Join(parts, "; ")
}

// variables binds one call's run parameters to the declared variable
// types. A variable is a JSON value, never spliced into the query text.
func (s *settings) variables(params map[string]string) (map[string]any, error) {
	values, err := s.values.Bind(params)
	if err != nil {
		return nil, err
	}
	vars, bad, err := s.rq.bindVariables(values)
	if err != nil {
		return nil, variablesError(bad, err)
	}
	return vars, nil
}

// encode makes the POST body: query, variables, operationName.
func (s *settings) encode(vars map[string]any) ([]byte, error) {
	body := map[string]any{"query": s.query}
	if len(vars) > 0 {
		body["variables"] = vars
	}
	if s.rq.name != "" {
		body["operationName"] = s.rq.name
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("graphql adapter: encoding the request: %w", err)
	}
	return b, nil
}

package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// config is the section as written.
type config struct {
	httpx.Endpoint
	httpx.CompletenessConfig
	FieldPaths  map[string]string          `json:"field_paths"`
	RecordsPath string                     `json:"records_path"`
	RecordsKey  string                     `json:"records_key"`
	PathParams  map[string]json.RawMessage `json:"path_params"`
	Pagination  *pagination                `json:"pagination"`
	Auth        *httpx.Auth                `json:"auth"`
}

type pagination struct {
	NextKey     string  `json:"next_key"`
	OffsetParam string  `json:"offset_param"`
	LimitParam  *string `json:"limit_param"`
	PageSize    *int    `json:"page_size"`
	MaxPages    *int    `json:"max_pages"`
}

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	// Binding binds a call's run parameters into records_path (firstURL),
	// and answers CheckParams with it.
	sdk.Binding[*url.URL]
	base       *url.URL
	tmpl       *pathTemplate // records_path
	values     param.Values  // path_params, bound per call
	recordsKey httpx.Path    // nil: the body itself is the list
	nextKey    httpx.Path    // next-link paging
	offset     *offsetPaging // offset/limit paging
	maxPages   int
	paging     string // how pagination is configured, "" without it
	complete   httpx.Completeness
	fields     httpx.FieldPaths // nil: records are read whole
	client     *http.Client
	creds      httpx.Credentials
	warnings   []string
}

type offsetPaging struct {
	offsetParam, limitParam string
	size                    int
}

// New returns an unconfigured rest adapter, which reads a JSON list of
// records over HTTP GET; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks the section and path_params and builds the HTTP client.
// It does not connect; each call binds its run parameters into
// records_path.
func configure(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	s := &settings{}
	s.Binding = s.firstURL
	var err error
	if s.base, err = cfg.URL(); err != nil {
		return nil, err
	}
	if cfg.RecordsPath == "" {
		return nil, &refusal.Error{Path: "records_path", Message: "missing: write the path (and query) of the list to read, e.g. /api/resource/Encounter?filters=..."}
	}
	tmpl, err := parseTemplate(cfg.RecordsPath)
	if err != nil {
		return nil, &refusal.Error{Path: "records_path", Message: err.Error()}
	}
	if s.values, err = httpx.Values("path_params", cfg.PathParams); err != nil {
		return nil, err
	}
	for _, name := range s.values.Names() {
		if !slices.Contains(tmpl.names, name) {
			return nil, &refusal.Error{Path: "path_params." + name, Message: fmt.Sprintf("records_path never uses it; write {%s} in records_path or remove the entry", name)}
		}
	}
	for _, name := range tmpl.names {
		if !slices.Contains(s.values.Names(), name) {
			return nil, &refusal.Error{Path: "records_path", Message: fmt.Sprintf("placeholder {%s} has no entry in path_params", name)}
		}
	}
	s.tmpl = tmpl
	if _, err := url.Parse(s.base.String() + tmpl.text); err != nil {
		return nil, &refusal.Error{Path: "records_path", Message: "does not make a URL with base_url: " + err.Error()}
	}
	if cfg.RecordsKey != "" {
		if s.recordsKey, err = httpx.ParsePath(cfg.RecordsKey); err != nil {
			return nil, &refusal.Error{Path: "records_key", Message: err.Error()}
		}
	}
	if err := s.parsePagination(cfg.Pagination); err != nil {
		return nil, err
	}
	pageSize := 0
	if s.offset != nil {
		pageSize = s.offset.size
	}
	if s.complete, err = httpx.ParseCompleteness(cfg.CompletenessConfig, s.paging, pageSize, s.maxPages, "pagination.max_pages"); err != nil {
		return nil, err
	}
	if s.fields, err = httpx.ParseFieldPaths("field_paths", cfg.FieldPaths); err != nil {
		return nil, err
	}
	if s.creds, s.client, s.warnings, err = cfg.Connect(s.base, cfg.Auth, req.Secrets); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *settings) parsePagination(p *pagination) error {
	s.maxPages = 1
	if p == nil {
		return nil
	}
	var err error
	if s.maxPages, err = httpx.MaxPages("pagination.max_pages", p.MaxPages); err != nil {
		return err
	}
	switch {
	case p.NextKey != "" && (p.OffsetParam != "" || p.LimitParam != nil || p.PageSize != nil):
		return &refusal.Error{Path: "pagination.next_key", Message: "choose one paging style: next_key, or offset_param with limit_param and page_size"}
	case p.NextKey != "":
		if s.nextKey, err = httpx.ParsePath(p.NextKey); err != nil {
			return &refusal.Error{Path: "pagination.next_key", Message: err.Error()}
		}
		s.paging = "next-page links at " + s.nextKey.String()
		return nil
	case p.OffsetParam == "":
		return &refusal.Error{Path: "pagination.next_key", Message: "pagination needs next_key (where the body holds the next page's URL) or offset_param, limit_param and page_size"}
	}
	o := &offsetPaging{offsetParam: p.OffsetParam}
	if p.LimitParam != nil {
		o.limitParam = *p.LimitParam
	}
	if o.limitParam == "" || o.limitParam == o.offsetParam {
		return &refusal.Error{Path: "pagination.limit_param", Message: "name the query parameter that sets the page size (Frappe: limit_page_length), other than offset_param"}
	}
	if p.PageSize == nil {
		return &refusal.Error{Path: "pagination.page_size", Message: "missing: the number of records to ask for per page, e.g. 500"}
	}
	if o.size, err = httpx.IntIn("pagination.page_size", p.PageSize, 0, 1, 1_000_000); err != nil {
		return err
	}
	s.offset = o
	s.paging = fmt.Sprintf("offset paging (%s/%s, %d per page, until an empty page)", o.offsetParam, o.limitParam, o.size)
	return nil
}

// firstURL binds one call's run parameters into records_path. A value that
// cannot stand where its placeholder is (a path segment holding '/', a
// control character) is refused, never spliced; in the path, a literal or
// template entry of path_params is escaped whole as one segment, in the
// query each parameter is escaped for its place (expandRecordsPath).
func (s *settings) firstURL(params map[string]string) (*url.URL, error) {
	expanded, err := expandRecordsPath(s.tmpl.text, s.values, params)
	if err != nil {
		if pe, ok := errors.AsType[*refusal.Error](err); ok && pe.Path != "" {
			return nil, err // a parameter the run does not supply
		}
		return nil, &refusal.Error{Path: "records_path", Message: err.Error()}
	}
	u, err := url.Parse(s.base.String() + expanded)
	if err != nil {
		return nil, &refusal.Error{Path: "records_path", Message: "does not make a URL with base_url: " + err.Error()}
	}
	return u, nil
}

// TestConnection reads the first page and reports what came back.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return s.Test(ctx, req, s.probe)
}

// probe reads the whole list at first, as a capture would, and reports
// how the read is complete.
func (s *settings) probe(ctx context.Context, first *url.URL) (sdk.TestResult, error) {
	return s.complete.Preflight(ctx, s.warnings, s.pager(first).fetch, func(read string, firstPage int) string {
		return fmt.Sprintf("%s answered with %s using %s: %s (%d on the first page); %s; records are %s. %s",
			httpx.Target(http.MethodGet, first), s.describeKey(), s.creds.Scheme(), read, firstPage, s.complete.Describe(), s.fields, httpx.NoWriteCheck)
	})
}

func (s *settings) describeKey() string {
	if s.recordsKey == nil {
		return "a list of records"
	}
	return "a list of records at " + s.recordsKey.String()
}

// Read reads every page before answering, bounded by the capture's
// deadline, so that a refused, broken or incomplete read (past max_pages,
// a full single response, a count that differs from the declared total) is
// an unreachable capture, never a partial list.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return httpx.ReadBound(ctx, &s.complete, req, s.firstURL, func(first *url.URL) httpx.Fetch { return s.pager(first).fetch })
}

// pager walks the pages of one read.
type pager struct {
	s       *settings
	first   *url.URL
	next    *url.URL
	pages   int
	offset  int
	visited map[string]bool
}

func (s *settings) pager(first *url.URL) *pager {
	return &pager{s: s, first: first, next: first, visited: map[string]bool{}}
}

// fetch reads the next page. why is non-empty when the read failed.
func (p *pager) fetch(ctx context.Context) (httpx.Page, string) {
	recs, more, body, header, why := p.fetchPage(ctx)
	if why != "" {
		return httpx.Page{}, why
	}
	if err := p.s.fields.FlattenAll(recs, "the page's records"); err != nil {
		return httpx.Page{}, err.Error()
	}
	return httpx.Page{Records: recs, More: more, Body: body, Header: header}, ""
}

// fetchPage reads the next page: its records, whether another page
// follows, the decoded body and the headers, or why the read failed.
func (p *pager) fetchPage(ctx context.Context) (recs []sdk.Record, more bool, body any, header http.Header, why string) {
	s := p.s
	u := p.next
	if s.offset != nil {
		u = withQuery(p.first, map[string]string{
			s.offset.offsetParam: strconv.Itoa(p.offset),
			s.offset.limitParam:  strconv.Itoa(s.offset.size),
		})
	}
	p.pages++
	what := httpx.Target(http.MethodGet, u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false, nil, nil, fmt.Sprintf("%s: %v", what, err)
	}
	req.Header.Set("Accept", "application/json")
	s.creds.Set(req.Header)
	start := time.Now()
	res, err := httpx.Do(s.client, req)
	if err != nil {
		return nil, false, nil, nil, httpx.TransportFailure(ctx, what, err, s.creds)
	}
	sdk.Logger(ctx).Debug("read a page", "page", p.pages, "status", res.Status, "bytes", len(res.Body), "took", time.Since(start))
	if res.Status < 200 || res.Status > 299 {
		return nil, false, nil, nil, httpx.StatusFailure(what, res, s.creds)
	}
	body, err = httpx.DecodeJSON(res.Body)
	if err != nil {
		return nil, false, nil, nil, fmt.Sprintf("%s answered %d with a body that is not JSON (%v): %s", what, res.Status, err, httpx.Excerpt(res.Body, s.creds))
	}
	list := body
	where := "the body"
	if s.recordsKey != nil {
		where = "records_key " + s.recordsKey.String()
		v, found := s.recordsKey.Lookup(body)
		if found != httpx.Present {
			return nil, false, nil, nil, fmt.Sprintf("%s answered %d, but the body has no list at %s: %s", what, res.Status, where, httpx.Excerpt(res.Body, s.creds))
		}
		list = v
	}
	if recs, err = httpx.ListRecords(list, where); err != nil {
		return nil, false, nil, nil, fmt.Sprintf("%s answered %d, but %v", what, res.Status, err)
	}
	switch {
	case s.offset != nil:
		// Only an empty page ends the list: a server that caps the page
		// size below page_size answers short pages that are not the last.
		p.offset += len(recs)
		return recs, len(recs) > 0, body, res.Header, ""
	case s.nextKey != nil:
		p.visited[u.String()] = true
		ref, found := s.nextKey.Lookup(body)
		if found != httpx.Present {
			return recs, false, body, res.Header, ""
		}
		link, ok := ref.(string)
		if !ok {
			return nil, false, nil, nil, fmt.Sprintf("%s: pagination.next_key %s holds %s, not a URL", what, s.nextKey, httpx.KindOf(ref))
		}
		if link == "" {
			return recs, false, body, res.Header, ""
		}
		next, err := httpx.Follow(s.base, u, link)
		if err != nil {
			return nil, false, nil, nil, fmt.Sprintf("%s: %v", what, err)
		}
		if p.visited[next.String()] {
			return nil, false, nil, nil, fmt.Sprintf("%s: the next-page link leads back to a page already read; the list cannot be read to its end", what)
		}
		p.next = next
		return recs, true, body, res.Header, ""
	}
	return recs, false, body, res.Header, ""
}

// withQuery returns u with params set in its query, replacing any earlier
// value; the rest of the query is kept byte for byte.
func withQuery(u *url.URL, params map[string]string) *url.URL {
	var kept []string
	if u.RawQuery != "" {
		for pair := range strings.SplitSeq(u.RawQuery, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if name, err := url.QueryUnescape(k); err == nil {
				if _, replaced := params[name]; replaced {
					continue
				}
			}
			kept = append(kept, pair)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kept = append(kept, url.QueryEscape(k)+"="+url.QueryEscape(params[k]))
	}
	v := *u
	v.RawQuery = strings.Join(kept, "&")
	return &v
}

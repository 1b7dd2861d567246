package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
)

// config is the section as written.
type config struct {
	httpx.Endpoint
	Query       string                     `json:"graphql_query"`
	Variables   map[string]json.RawMessage `json:"graphql_variables"`
	RecordsPath string                     `json:"graphql_records_path"`
	Auth        *httpx.Auth                `json:"auth"`
	// Refused with a pointer to the daemon's freshness_field (see configure).
	FreshnessField   any `json:"graphql_freshness_field"`
	FreshnessWindowS any `json:"graphql_freshness_window_s"`
}

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	// Binding binds a call's run parameters to the query's variables and
	// encodes the request body (body), and answers CheckParams with it.
	sdk.Binding[[]byte]
	endpoint *url.URL
	query    string       // graphql_query
	rq       *readQuery   // its parse
	values   param.Values // graphql_variables, bound per call
	records  httpx.Path   // inside data
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
		return nil, &sdk.ConfigError{Path: k, Message: "freshness is judged by the daemon: write freshness_field and freshness_window_s in this section instead (same meaning; the judge demotes a stale match to INDETERMINATE, class stale)"}
	}
	s := &settings{}
	s.Binding = s.body
	var err error
	if s.endpoint, err = cfg.URL(); err != nil {
		return nil, err
	}
	rq, err := parseReadQuery(cfg.Query)
	if err != nil {
		return nil, &sdk.ConfigError{Path: "graphql_query", Message: err.Error()}
	}
	if s.values, err = httpx.Values("graphql_variables", cfg.Variables); err != nil {
		return nil, err
	}
	if bad, err := rq.checkDeclared(s.values.Names()); err != nil {
		return nil, variablesError(bad, err)
	}
	s.query, s.rq = cfg.Query, rq
	if s.records, err = recordsPath(cfg.RecordsPath, rq); err != nil {
		return nil, err
	}
	if s.creds, s.client, s.warnings, err = cfg.Connect(s.endpoint, cfg.Auth, req.Secrets); err != nil {
		return nil, err
	}
	return s, nil
}

// recordsPath reads graphql_records_path, a dotted path inside the answer's
// data. Without it, a query selecting one top-level field reads that field.
func recordsPath(raw string, rq *readQuery) (httpx.Path, error) {
	if raw == "" {
		if len(rq.fields) != 1 {
			return nil, &sdk.ConfigError{Path: "graphql_records_path", Message: "missing: the query selects several top-level fields; name the list of records inside data, e.g. encounters or patient.encounters"}
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
		return nil, &sdk.ConfigError{Path: "graphql_records_path", Message: err.Error()}
	}
	if rq.fields != nil && !slices.Contains(rq.fields, p[0]) {
		return nil, &sdk.ConfigError{Path: "graphql_records_path", Message: fmt.Sprintf("the query selects no top-level field %q (it selects %s)", p[0], strings.Join(rq.fields, ", "))}
	}
	return p, nil
}

func variablesError(bad string, err error) error {
	path := "graphql_variables"
	if bad != "" {
		path += "." + bad
	}
	return &sdk.ConfigError{Path: path, Message: err.Error()}
}

// TestConnection runs the query once and reports what came back.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return s.Test(ctx, req, s.probe)
}

// probe posts the query with body once.
func (s *settings) probe(ctx context.Context, body []byte) (sdk.TestResult, error) {
	return httpx.Probe(ctx, s.warnings, func(ctx context.Context) (string, string) {
		recs, why := s.read(ctx, body)
		return why, fmt.Sprintf("%s answered the query with %d records at %s using %s", httpx.Target(http.MethodPost, s.endpoint), len(recs), s.records, s.creds.Scheme())
	}), nil
}

func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	body, err := s.body(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	return httpx.Pages(ctx, req.Timeout, func(ctx context.Context) ([]sdk.Record, bool, string) {
		recs, why := s.read(ctx, body)
		return recs, false, why
	}, nil), nil
}

// gqlAnswer is a GraphQL response: data, and errors when anything failed.
type gqlAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// read POSTs the query (a GraphQL read is a POST; it is the only method
// this adapter sends) and returns the records, or why there are none to
// judge.
func (s *settings) read(ctx context.Context, body []byte) ([]sdk.Record, string) {
	what := httpx.Target(http.MethodPost, s.endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	s.creds.Set(req.Header)
	res, err := httpx.Do(s.client, req)
	if err != nil {
		return nil, httpx.TransportFailure(ctx, what, err, s.creds)
	}
	var ans gqlAnswer
	jsonErr := json.Unmarshal(res.Body, &ans)
	if res.Status < 200 || res.Status > 299 {
		if jsonErr == nil && len(ans.Errors) > 0 {
			return nil, fmt.Sprintf("%s answered %d %s: %s", what, res.Status, http.StatusText(res.Status), s.messages(ans))
		}
		return nil, httpx.StatusFailure(what, res, s.creds)
	}
	if jsonErr != nil {
		return nil, fmt.Sprintf("%s answered %d with a body that is not a GraphQL response (%v): %s", what, res.Status, jsonErr, httpx.Excerpt(res.Body, s.creds))
	}
	// Partial data next to errors is still a failed read: a list that a
	// failing resolver nulled out is not "no records".
	if len(ans.Errors) > 0 {
		return nil, fmt.Sprintf("%s: the GraphQL answer carries errors: %s", what, s.messages(ans))
	}
	data, err := httpx.DecodeJSON(ans.Data)
	if err != nil || data == nil {
		return nil, fmt.Sprintf("%s answered %d without data: %s", what, res.Status, httpx.Excerpt(res.Body, s.creds))
	}
	v, found := s.records.Lookup(data)
	switch found {
	case httpx.Null:
		// The query resolved to null on the way (the entity has no such
		// record): an answer with no records, not a failure.
		return nil, ""
	case httpx.Missing:
		return nil, fmt.Sprintf("%s: the answer has no %s in data: %s", what, s.records, httpx.Excerpt(ans.Data, s.creds))
	}
	recs, err := httpx.ListRecords(v, "data."+s.records.String())
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", what, err)
	}
	return recs, ""
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

// body binds one call's run parameters to the declared variable types and
// encodes the POST body: query, variables, operationName. A variable is a
// JSON value, never spliced into the query text.
func (s *settings) body(params map[string]string) ([]byte, error) {
	values, err := s.values.Bind(params)
	if err != nil {
		return nil, err
	}
	vars, bad, err := s.rq.bindVariables(values)
	if err != nil {
		return nil, variablesError(bad, err)
	}
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

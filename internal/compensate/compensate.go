// Package compensate runs verifierd's one automatic repair: deleting the
// duplicates of an irreversible record_written effect that was refuted with
// observed > expected, through a configured REST DELETE template. It is a
// write, so it lives in the daemon and never in a read-only adapter. It
// decides when a repair applies (Applies); the judge plans which records to
// delete (judge.PlanCompensation); this package sends the DELETEs, one
// record at a time, stopping at the
// first failure and reporting what it had deleted by then, so that the
// daemon can re-verify against the original baseline or raise a
// compensation_failed task (judge.NewTask with TaskOptions.CompensationFailed).
//
// Configuration (off unless a deployment has this section):
//
//	compensator:
//	  kind: rest_delete
//	  base_url: https://erp.example.com
//	  delete_path: /api/resource/Patient%20Encounter/{name}
//	  auth: {header: Authorization, value_env: ERP_WRITE_TOKEN}  # or bearer_env, basic_env
//	  verify_tls: true
//	  ca_file: /etc/verifierd/erp-ca.pem
//	  timeout_s: 10
//
// Each {field} in delete_path is filled from the record being deleted with
// sdk/param: one path segment before the first '?' (a value holding '/',
// '\', or being "", "." or "..", is refused), query-escaped after it.
package compensate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// KindRESTDelete is the compensator kind this package runs.
const KindRESTDelete = "rest_delete"

// DefaultTimeout bounds one DELETE unless timeout_s says otherwise.
const DefaultTimeout = 10 * time.Second

// ErrNotConfigured is Delete on a nil Compensator: the deployment has no
// compensator section, so nothing is ever deleted.
var ErrNotConfigured = errors.New("compensate: no compensator is configured")

// config is the compensator section as written.
type config struct {
	httpx.Endpoint
	DeletePath string      `json:"delete_path"`
	Auth       *httpx.Auth `json:"auth"`
	TimeoutS   *float64    `json:"timeout_s"`
}

// refuse is a refusal of the section's key at path (inside the section;
// "" for the whole section).
func refuse(path, message string) *refusal.Error {
	return refusal.New("", path, message).Under("compensator")
}

// DeleteError is a DELETE that did not succeed. Index is the record's
// position in the slice given to Delete; the records before it were
// deleted, the ones from it on were not touched (the failed one may or may
// not have been, when the answer never came).
type DeleteError struct {
	Index  int
	Target string // method and URL without its query
	Status int    // 0 when no answer came
	Reason string // what happened, secrets redacted
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf("compensation stopped at record %d: %s: %s", e.Index, e.Target, e.Reason)
}

// Compensator deletes records through a REST DELETE template. It is safe
// for concurrent use; each Delete call is independent.
type Compensator struct {
	base    *url.URL
	tmpl    string
	client  *http.Client
	creds   httpx.Credentials
	timeout time.Duration
}

// Applies reports whether the compensator may repair a verdict, and with
// which plan: only when the deployment configures one (section is not
// nil), for an irreversible record_written refuted for duplicates alone.
// Anything else keeps its ordinary reconciliation task.
func Applies(section map[string]any, c *judge.Contract, v *judge.Verdict) (*judge.CompensationPlan, bool) {
	if section == nil || c.Kind != judge.RecordWritten || c.Risk != judge.Irreversible || v.Decision != judge.Refuted {
		return nil, false
	}
	plan, err := judge.PlanCompensation(c, v)
	if err != nil {
		return nil, false // not a duplicate
	}
	return plan, true
}

// SecretRefs lists the secret references of a compensator section: each
// key ending in _env at any depth, by its dotted path inside the section
// (auth.bearer_env), mapped to the environment variable it names. The
// daemon resolves them (under its secrets.allow policy) and passes the
// values to Parse under the same slots.
func SecretRefs(section map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(sub, p)
			}
		case string:
			if strings.HasSuffix(path, "_env") {
				out[path] = x
			}
		}
	}
	walk(section, "")
	return out
}

// Parse checks a compensator section and resolves its credentials from
// secrets (slot -> value, slots as SecretRefs names them; a slot prefixed
// "compensator." is accepted too). A nil section means no compensator:
// Parse returns nil, nil, and the daemon must not compensate. The section is
// read with internal/httpx, as the HTTP adapters read theirs.
func Parse(section map[string]any, secrets map[string]string) (*Compensator, error) {
	if section == nil {
		return nil, nil
	}
	if kind, _ := section["kind"].(string); kind != KindRESTDelete {
		return nil, refuse("kind", fmt.Sprintf("must be %s (the only compensator: a REST DELETE of each duplicate)", KindRESTDelete))
	}
	raw, err := json.Marshal(section)
	if err != nil {
		return nil, refuse("", "the section cannot be read: "+err.Error())
	}
	c, err := parse(raw, slots(secrets))
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		return nil, refuse(ce.Path, ce.Message)
	}
	return c, err
}

func parse(raw json.RawMessage, secrets map[string]string) (*Compensator, error) {
	var cfg config
	if err := (sdk.ConfigureRequest{Kind: KindRESTDelete, Config: raw}).DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	c := &Compensator{timeout: DefaultTimeout}
	var err error
	if c.base, err = cfg.URL(); err != nil {
		return nil, err
	}
	if c.tmpl, err = parseDeletePath(cfg.DeletePath); err != nil {
		return nil, err
	}
	if cfg.TimeoutS != nil {
		if f := *cfg.TimeoutS; f <= 0 || f > 600 {
			return nil, &refusal.Error{Path: "timeout_s", Message: "must be a number of seconds above 0 and at most 600"}
		}
		c.timeout = time.Duration(*cfg.TimeoutS * float64(time.Second))
	}
	if c.creds, c.client, _, err = cfg.Connect(c.base, cfg.Auth, secrets); err != nil {
		return nil, err
	}
	// A redirected DELETE is not followed: it would delete something other
	// than the record the template names.
	c.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c, nil
}

// slots accepts a secret under its slot inside the section (auth.bearer_env)
// or under the section's own path (compensator.auth.bearer_env).
func slots(secrets map[string]string) map[string]string {
	out := make(map[string]string, len(secrets))
	for k, v := range secrets {
		if !strings.HasPrefix(k, "compensator.") {
			out[k] = v
		}
	}
	for k, v := range secrets {
		if rest, ok := strings.CutPrefix(k, "compensator."); ok && out[rest] == "" {
			out[rest] = v
		}
	}
	return out
}

// Delete deletes records one by one, in order, with DELETE base_url +
// delete_path filled from each record. Every record is addressed before the
// first DELETE goes out, so a record that cannot fill the template deletes
// nothing. It stops at the first failure (a transport error, a redirect, or
// a status other than 200, 202 or 204; a 404 too, since the record was not
// where the template says) and returns the records deleted so far with a
// *DeleteError. ctx bounds the whole run; each DELETE also has timeout_s.
func (c *Compensator) Delete(ctx context.Context, records []map[string]any) (deleted []map[string]any, err error) {
	if c == nil {
		return nil, ErrNotConfigured
	}
	targets := make([]*url.URL, len(records))
	for i, r := range records {
		p, err := expand(c.tmpl, r)
		if err != nil {
			return nil, &DeleteError{Index: i, Target: "DELETE " + c.base.String() + c.tmpl, Reason: err.Error() + "; nothing was deleted"}
		}
		if targets[i], err = url.Parse(c.base.String() + p); err != nil {
			return nil, &DeleteError{Index: i, Target: "DELETE " + c.base.String() + c.tmpl, Reason: "the filled template is not a URL: " + err.Error() + "; nothing was deleted"}
		}
	}
	deleted = make([]map[string]any, 0, len(records))
	for i, u := range targets {
		if err := c.deleteOne(ctx, i, u); err != nil {
			return deleted, err
		}
		deleted = append(deleted, records[i])
	}
	return deleted, nil
}

func (c *Compensator) deleteOne(ctx context.Context, index int, u *url.URL) error {
	target := httpx.Target(http.MethodDelete, u)
	fail := func(status int, reason string) error {
		return &DeleteError{Index: index, Target: target, Status: status, Reason: c.creds.Redact(reason)}
	}
	if err := ctx.Err(); err != nil {
		return fail(0, "not sent: "+err.Error())
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return fail(0, err.Error())
	}
	req.Header.Set("Accept", "application/json")
	c.creds.Set(req.Header)
	res, err := c.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fail(0, "no answer in time; the record may or may not be deleted")
		}
		return fail(0, err.Error())
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch res.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	}
	reason := fmt.Sprintf("answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
	if ex := httpx.Excerpt(body, c.creds); ex != "" {
		reason += ": " + ex
	}
	return fail(res.StatusCode, reason)
}

func parseDeletePath(s string) (string, error) {
	switch {
	case s == "":
		return "", &refusal.Error{Path: "delete_path", Message: "missing: write the path that deletes one record, e.g. /api/resource/Encounter/{name}"}
	case !strings.HasPrefix(s, "/"):
		return "", &refusal.Error{Path: "delete_path", Message: "must start with /"}
	case strings.ContainsAny(s, "# \t\r\n"):
		return "", &refusal.Error{Path: "delete_path", Message: "must be URL-encoded (a space is %20) and have no fragment"}
	}
	fields := param.Placeholders(s)
	if q := strings.IndexByte(s, '?'); len(fields) == 0 || q >= 0 && fields[0].Start > q {
		return "", &refusal.Error{Path: "delete_path", Message: "must name the record in its path with a {field} placeholder (e.g. /api/resource/Encounter/{name}); a path without one would delete the same URL for every duplicate"}
	}
	return s, nil
}

// expand fills delete_path from one record with param.Expand: a value in
// the path is exactly one segment (never empty, "." or "..", never holding
// '/' or '\'), which would address another resource; a value in the query
// is query-escaped; control characters are refused in both.
func expand(tmpl string, rec map[string]any) (string, error) {
	values := map[string]string{}
	for _, ph := range param.Placeholders(tmpl) {
		v, err := text(rec[ph.Name])
		if err != nil {
			return "", fmt.Errorf("the record's %q %v, so delete_path cannot address it", ph.Name, err)
		}
		values[ph.Name] = v
	}
	out, err := param.Expand(tmpl, param.URL, param.Lookup(func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}))
	if err != nil {
		return "", fmt.Errorf("the record does not fill delete_path: %v", err)
	}
	return out, nil
}

// text is a record value as it was written (param.Text).
func text(v any) (string, error) {
	if v == nil {
		return "", errors.New("is missing or null")
	}
	s, ok := param.Text(v)
	if !ok {
		return "", fmt.Errorf("is a %T, not a scalar", v)
	}
	return s, nil
}

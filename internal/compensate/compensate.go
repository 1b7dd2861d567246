// Package compensate runs verifierd's one automatic repair: deleting the
// duplicates of an irreversible record_written effect that was refuted with
// observed > expected, through a configured REST DELETE template. It is a
// write, so it lives in the daemon and never in a read-only adapter. The
// judge plans which records to delete (judge.PlanCompensation); this
// package only sends the DELETEs, one record at a time, stopping at the
// first failure and reporting what it had deleted by then, so that the
// daemon can re-verify against the original baseline or raise a
// compensation_failed task (judge.CompensationFailedTask).
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
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/verifierd/verifierd/sdk/param"
)

// KindRESTDelete is the compensator kind this package runs.
const KindRESTDelete = "rest_delete"

// DefaultTimeout bounds one DELETE unless timeout_s says otherwise.
const DefaultTimeout = 10 * time.Second

// ErrNotConfigured is Delete on a nil Compensator: the deployment has no
// compensator section, so nothing is ever deleted.
var ErrNotConfigured = errors.New("compensate: no compensator is configured")

var sectionKeys = []string{"kind", "base_url", "delete_path", "auth", "verify_tls", "ca_file", "timeout_s"}
var authKeys = []string{"bearer_env", "header", "value_env", "basic_env"}

// Error refuses a compensator section: Path is the key inside the section
// (auth.bearer_env), Message what is wrong and what to write instead.
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string { return "compensator." + e.Path + ": " + e.Message }

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
	header  string
	value   string
	redact  []string
	timeout time.Duration
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
// Parse returns nil, nil, and the daemon must not compensate.
func Parse(section map[string]any, secrets map[string]string) (*Compensator, error) {
	if section == nil {
		return nil, nil
	}
	if err := refuseUnknown(section, "", sectionKeys); err != nil {
		return nil, err
	}
	kind, _ := section["kind"].(string)
	if kind != KindRESTDelete {
		return nil, &Error{Path: "kind", Message: fmt.Sprintf("must be %s (the only compensator: a REST DELETE of each duplicate)", KindRESTDelete)}
	}
	c := &Compensator{timeout: DefaultTimeout}
	var err error
	if c.base, err = parseBase(section["base_url"]); err != nil {
		return nil, err
	}
	if c.tmpl, err = parseDeletePath(section["delete_path"]); err != nil {
		return nil, err
	}
	if v, ok := section["timeout_s"]; ok {
		f, isNum := number(v)
		if !isNum || f <= 0 || f > 600 {
			return nil, &Error{Path: "timeout_s", Message: "must be a number of seconds above 0 and at most 600"}
		}
		c.timeout = time.Duration(f * float64(time.Second))
	}
	if err := c.parseAuth(section["auth"], secrets); err != nil {
		return nil, err
	}
	if c.client, err = newClient(section); err != nil {
		return nil, err
	}
	return c, nil
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
	target := "DELETE " + withoutQuery(u)
	fail := func(status int, reason string) error {
		return &DeleteError{Index: index, Target: target, Status: status, Reason: c.redactText(reason)}
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
	if c.header != "" {
		req.Header.Set(c.header, c.value)
	}
	res, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
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
	// Redacted before clipping, so a secret straddling the cut cannot leak
	// its first half.
	if ex := clip(c.redactText(string(body)), 240); ex != "" {
		reason += ": " + ex
	}
	return fail(res.StatusCode, reason)
}

// redactText replaces every form of the credential in s.
func (c *Compensator) redactText(s string) string {
	for _, f := range c.redact {
		s = strings.ReplaceAll(s, f, "[redacted]")
	}
	return s
}

func (c *Compensator) parseAuth(v any, secrets map[string]string) error {
	if v == nil {
		return nil
	}
	auth, ok := v.(map[string]any)
	if !ok {
		return &Error{Path: "auth", Message: "must be a map: bearer_env, basic_env, or header with value_env"}
	}
	if err := refuseUnknown(auth, "auth.", authKeys); err != nil {
		return err
	}
	var set []string
	for _, k := range []string{"bearer_env", "basic_env", "header"} {
		if _, ok := auth[k]; ok {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		return &Error{Path: "auth", Message: "set exactly one of bearer_env, basic_env, or header with value_env"}
	}
	secret := func(key string) (string, error) {
		name, ok := auth[key].(string)
		if !ok || name == "" {
			return "", &Error{Path: "auth." + key, Message: "must name an environment variable"}
		}
		v, ok := secrets["auth."+key]
		if !ok {
			v, ok = secrets["compensator.auth."+key]
		}
		if !ok || v == "" {
			return "", &Error{Path: "auth." + key, Message: fmt.Sprintf("no value was delivered for the environment variable %s", name)}
		}
		if strings.ContainsAny(v, "\r\n") {
			return "", &Error{Path: "auth." + key, Message: fmt.Sprintf("the value of %s holds a line break", name)}
		}
		return v, nil
	}
	switch set[0] {
	case "bearer_env":
		tok, err := secret("bearer_env")
		if err != nil {
			return err
		}
		c.header, c.value, c.redact = "Authorization", "Bearer "+tok, longestFirst(tok)
	case "basic_env":
		pair, err := secret("basic_env")
		if err != nil {
			return err
		}
		user, pass, ok := strings.Cut(pair, ":")
		if !ok || user == "" {
			return &Error{Path: "auth.basic_env", Message: "the variable must hold user:password"}
		}
		enc := base64.StdEncoding.EncodeToString([]byte(pair))
		c.header, c.value, c.redact = "Authorization", "Basic "+enc, longestFirst(enc, pair, pass)
	default:
		name, _ := auth["header"].(string)
		if !validHeader(name) {
			return &Error{Path: "auth.header", Message: fmt.Sprintf("%q is not a usable header name", name)}
		}
		if _, ok := auth["value_env"]; !ok {
			return &Error{Path: "auth.value_env", Message: "missing: name the environment variable that holds the header's value"}
		}
		v, err := secret("value_env")
		if err != nil {
			return err
		}
		_, rest, _ := strings.Cut(v, " ")
		c.header, c.value, c.redact = http.CanonicalHeaderKey(name), v, longestFirst(v, rest)
	}
	return nil
}

func parseBase(v any) (*url.URL, error) {
	s, _ := v.(string)
	if s == "" {
		return nil, &Error{Path: "base_url", Message: "missing: write the server's URL, e.g. https://erp.example.com"}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, &Error{Path: "base_url", Message: "not a URL: " + err.Error()}
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, &Error{Path: "base_url", Message: "must start with https:// or http://"}
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, &Error{Path: "base_url", Message: "must be scheme://host[:port][/path], without credentials, query or fragment"}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

func parseDeletePath(v any) (string, error) {
	s, _ := v.(string)
	switch {
	case s == "":
		return "", &Error{Path: "delete_path", Message: "missing: write the path that deletes one record, e.g. /api/resource/Encounter/{name}"}
	case !strings.HasPrefix(s, "/"):
		return "", &Error{Path: "delete_path", Message: "must start with /"}
	case strings.ContainsAny(s, "# \t\r\n"):
		return "", &Error{Path: "delete_path", Message: "must be URL-encoded (a space is %20) and have no fragment"}
	}
	fields := param.Placeholders(s)
	if q := strings.IndexByte(s, '?'); len(fields) == 0 || q >= 0 && fields[0].Start > q {
		return "", &Error{Path: "delete_path", Message: "must name the record in its path with a {field} placeholder (e.g. /api/resource/Encounter/{name}); a path without one would delete the same URL for every duplicate"}
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
	out, err := param.Expand(tmpl, param.URL, func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	})
	if err != nil {
		return "", fmt.Errorf("the record does not fill delete_path: %v", err)
	}
	return out, nil
}

// text is a record value as the judge would print it.
func text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", errors.New("is missing or null")
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("is a %T, not a scalar", v)
}

func newClient(section map[string]any) (*http.Client, error) {
	verify := true
	if v, ok := section["verify_tls"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, &Error{Path: "verify_tls", Message: "must be true or false"}
		}
		verify = b
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verify}
	if v, ok := section["ca_file"]; ok {
		path, _ := v.(string)
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, &Error{Path: "ca_file", Message: fmt.Sprintf("cannot read %q: %v", path, err)}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &Error{Path: "ca_file", Message: path + " holds no PEM certificate"}
		}
		cfg.RootCAs = pool
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 2,
		},
		// A redirected DELETE is not followed: it would delete something
		// other than the record the template names.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

func refuseUnknown(m map[string]any, prefix string, known []string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ok := false
		for _, c := range known {
			ok = ok || k == c
		}
		if !ok {
			return &Error{Path: prefix + k, Message: "unknown key; the keys are " + strings.Join(known, ", ")}
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x)
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func validHeader(s string) bool {
	if s == "" || strings.EqualFold(s, "Host") || strings.EqualFold(s, "Content-Length") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func longestFirst(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func withoutQuery(u *url.URL) string {
	v := *u
	v.RawQuery, v.ForceQuery, v.Fragment = "", false, ""
	return v.String()
}

// clip makes s one printable line of at most n runes.
func clip(s string, n int) string {
	var b strings.Builder
	runes, space := 0, false
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if runes >= n {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			runes++
			space = false
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}

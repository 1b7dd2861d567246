package httpx

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// MaxBodyBytes bounds one response body: a page larger than this is a
// failed read, never a truncated one.
const MaxBodyBytes = 64 << 20

// ParseBaseURL checks the http or https URL raw, the value at path: it
// must have a host and no user info, query or fragment.
func ParseBaseURL(path, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, &refusal.Error{Path: path, Message: "missing: write the server's URL, e.g. https://erp.example.com"}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, &refusal.Error{Path: path, Message: "not a URL: " + err.Error()}
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &refusal.Error{Path: path, Message: fmt.Sprintf("must start with https:// or http://, not %q", u.Scheme)}
	case u.Host == "":
		return nil, &refusal.Error{Path: path, Message: "has no host"}
	case u.User != nil:
		return nil, &refusal.Error{Path: path, Message: "must not carry credentials; name their environment variable under auth instead"}
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, &refusal.Error{Path: path, Message: "must be scheme://host[:port][/path], without credentials, query or fragment; put the path and query of a request in its own keys"}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Client builds the HTTP client for reads from base, from verify_tls
// (default true) and ca_file (a PEM bundle trusted in addition to the
// system's roots). Redirects are followed only within base's origin, so a
// credential header is never sent to another server. It returns warnings
// for settings that work but weaken the read.
func (e Endpoint) Client(base *url.URL, creds Credentials) (*http.Client, []string, error) {
	verify, caFile := e.VerifyTLS == nil || *e.VerifyTLS, e.CAFile
	var warnings []string
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, &refusal.Error{Path: "ca_file", Message: fmt.Sprintf("cannot read %s: %v", caFile, unwrapPath(err))}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, &refusal.Error{Path: "ca_file", Message: caFile + " holds no PEM certificate"}
		}
		cfg.RootCAs = pool
	}
	if !verify {
		cfg.InsecureSkipVerify = true
		warnings = append(warnings, "verify_tls is false: the server's certificate is not checked, so anyone on the path can answer in its name; give its CA under ca_file instead")
	}
	if base.Scheme == "http" && !creds.None() {
		warnings = append(warnings, "base_url is http://: the credentials travel unencrypted")
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       cfg,
		TLSHandshakeTimeout:   10 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			if !SameOrigin(req.URL, base) {
				return fmt.Errorf("refused a redirect to another origin (%s://%s)", req.URL.Scheme, req.URL.Host)
			}
			return nil
		},
	}
	return client, warnings, nil
}

// Connect is the client side of a section with an `auth:` map: it reads
// auth (nil: none) with the values the daemon delivered in secrets and
// builds the client for base (Client), returning the credentials to send,
// the client and the warnings of settings that work but weaken the read.
func (e Endpoint) Connect(base *url.URL, auth *Auth, secrets map[string]string) (Credentials, *http.Client, []string, error) {
	creds, err := auth.Credentials(secrets)
	if err != nil {
		return Credentials{}, nil, nil, err
	}
	client, warnings, err := e.Client(base, creds)
	if err != nil {
		return Credentials{}, nil, nil, err
	}
	return creds, client, warnings, nil
}

// SameOrigin reports whether u has base's scheme, host and port.
func SameOrigin(u, base *url.URL) bool {
	return strings.EqualFold(u.Scheme, base.Scheme) && strings.EqualFold(hostPort(u), hostPort(base))
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return net.JoinHostPort(u.Hostname(), "443")
	case "http":
		return net.JoinHostPort(u.Hostname(), "80")
	}
	return u.Host
}

// Follow resolves a next-page reference against the page it came from and
// refuses one that leaves base's origin: the credentials go with it.
func Follow(base, current *url.URL, ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("the next-page link is not a URL: %v", err)
	}
	next := current.ResolveReference(r)
	if !SameOrigin(next, base) {
		return nil, fmt.Errorf("the next-page link leads to another origin (%s://%s); refusing to send the credentials there", next.Scheme, next.Host)
	}
	next.Fragment = ""
	return next, nil
}

// Response is a whole, bounded response.
type Response struct {
	Status      int
	ContentType string
	Header      http.Header
	Body        []byte
}

// Do sends req, which must carry its context, and reads the body whole,
// refusing one larger than MaxBodyBytes. Every request asks caches to
// revalidate: a capture must read afresh.
func Do(c *http.Client, req *http.Request) (*Response, error) {
	req.Header.Set("Cache-Control", "no-cache")
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("the response is larger than %d MiB; narrow the read or page it", MaxBodyBytes>>20)
	}
	return &Response{Status: res.StatusCode, ContentType: res.Header.Get("Content-Type"), Header: res.Header, Body: body}, nil
}

// DecodeJSON decodes one JSON value, numbers as json.Number so their text
// stays exact. Anything after the value is refused with a
// *TrailingDataError; an empty body is encoding/json's io.EOF. Duplicate
// object keys are not refused (the later wins): judge.DecodeJSON, for
// contracts, refuses them. A body nested more than jsondepth.Max levels is
// refused (*jsondepth.Error) before it is decoded.
func DecodeJSON(body []byte) (any, error) {
	if err := jsondepth.CheckJSON(body, "", jsondepth.Max); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &TrailingDataError{Offset: dec.InputOffset()}
	}
	return v, nil
}

// TrailingDataError is DecodeJSON's refusal of data after the value; Offset
// is where the decoder stood when it met it.
type TrailingDataError struct{ Offset int64 }

func (*TrailingDataError) Error() string { return "more data after the JSON value" }

// Target names a request for messages: method and URL without its query,
// which may hold a run's values.
func Target(method string, u *url.URL) string {
	v := *u
	v.RawQuery, v.ForceQuery, v.Fragment, v.User = "", false, "", nil
	return method + " " + v.String()
}

// TransportFailure describes a request that got no answer. what is a
// Target.
func TransportFailure(ctx context.Context, what string, err error, creds Credentials) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return what + ": no complete answer before the capture deadline"
	}
	if ctx.Err() != nil {
		return what + ": the read was cancelled"
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return creds.Redact(what + ": " + err.Error())
}

// StatusFailure describes a non-2xx answer with an excerpt of its body.
func StatusFailure(what string, r *Response, creds Credentials) string {
	msg := fmt.Sprintf("%s answered %d %s", what, r.Status, http.StatusText(r.Status))
	if ex := Excerpt(r.Body, creds); ex != "" {
		msg += ": " + ex
	}
	return msg
}

// ExcerptRunes bounds an excerpt of a body.
const ExcerptRunes = 240

// Excerpt is the start of body on one line, secrets redacted, at most
// ExcerptRunes runes.
func Excerpt(body []byte, creds Credentials) string {
	// Redact before cutting, so a secret straddling the cut cannot leak
	// its first half.
	head := body
	if len(head) > 4*ExcerptRunes+4096 {
		head = head[:4*ExcerptRunes+4096]
	}
	return Clip(creds.Redact(string(head)), ExcerptRunes)
}

// Clip makes s one printable line of at most n runes.
func Clip(s string, n int) string {
	var b strings.Builder
	runes, space := 0, false
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if r == utf8.RuneError && size <= 1 {
			r = '?'
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if runes >= n {
			b.WriteString("…")
			return b.String()
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

// WithTimeout bounds ctx by a capture's timeout (none when 0).
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Probe is the preflight of an HTTP adapter: it reads once within
// ProbeContext's deadline with read, which returns why the read failed,
// or "" and what to tell the operator about the answer. The result
// carries the adapter's configuration warnings and the read's latency.
func Probe(ctx context.Context, warnings []string, read func(ctx context.Context) (why, answered string)) sdk.TestResult {
	ctx, cancel := ProbeContext(ctx)
	defer cancel()
	start := time.Now()
	why, answered := read(ctx)
	res := sdk.TestResult{Latency: time.Since(start), Warnings: warnings, Message: why}
	if why == "" {
		res.Reachable = true
		res.Message = answered
	}
	return res
}

// ProbeRead is Probe for a read that also reports warnings about what it
// read (a full first page, a total that differs).
func ProbeRead(ctx context.Context, warnings []string, read func(ctx context.Context) (why, answered string, more []string)) sdk.TestResult {
	var more []string
	res := Probe(ctx, warnings, func(ctx context.Context) (string, string) {
		why, answered, w := read(ctx)
		more = w
		return why, answered
	})
	if len(more) > 0 {
		res.Warnings = append(append([]string{}, res.Warnings...), more...)
	}
	return res
}

// NoWriteCheck is what an HTTP adapter's preflight says about the
// credential's write access, which it never tests.
const NoWriteCheck = "preflight only reads: whether this credential can also write is not checked; give verifierd a read-only credential"

// ProbeContext bounds a TestConnection: 10 seconds, or four fifths of what
// remains of the caller's deadline, so that a silent server is reported as
// unreachable before the caller gives up on the adapter.
func ProbeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)*4/5)
	}
	return context.WithTimeout(ctx, d)
}

package httprecords

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
)

// FrappeTime is the layout of Frappe's creation and modified fields.
const FrappeTime = "2006-01-02 15:04:05.000000"

// Frappe is a Frappe-shaped REST API (/api/resource/<DocType>) over an
// in-memory store of documents.
//
//	GET    /api/resource/<DocType>?fields=[..]&filters=[..]&limit_start=N&limit_page_length=N&order_by=F asc|desc
//	GET    /api/resource/<DocType>/<name>
//	POST   /api/resource/<DocType>          (JSON document)
//	DELETE /api/resource/<DocType>/<name>
//	GET    /api/cursor/<DocType>?<field>=<value>&page_size=N   (next-link paging: links.next)
//
// Lists answer {"data": [...], "total_count": N} and the header
// X-Total-Count: N, N counting every document the filters match. A list
// holds 20 documents unless limit_page_length asks for another number (0:
// all); PageCap caps it below what was asked, as many servers do.
// Authentication is Frappe's: "token
// key:secret", Basic of key:secret, or an OAuth bearer token.
type Frappe struct {
	Faults
	// URL is the server's base URL; CAFile the PEM of its CA (TLS only).
	URL    string
	CAFile string
	// APIKey and APISecret make the token credential; Bearer is an OAuth
	// token the server also accepts.
	APIKey, APISecret, Bearer string

	client *http.Client

	mu       sync.Mutex
	docs     map[string][]map[string]any // doctype -> documents in creation order
	seq      int
	echoAuth testservers.Setting[bool]
	// defaultPage and pageCap: see DefaultPage and PageCap.
	defaultPage testservers.Setting[int]
	pageCap     testservers.Setting[int]
}

// DefaultPage sets how many documents a list holds when limit_page_length
// is absent (20 unless set; 0 restores that).
func (f *Frappe) DefaultPage(n int) { f.defaultPage.Set(n) }

// PageCap makes every list hold at most n documents whatever
// limit_page_length asks (0: no cap), as a server with a hard page limit
// does.
func (f *Frappe) PageCap(n int) { f.pageCap.Set(n) }

// NewFrappe starts a Frappe-shaped server for the test.
func NewFrappe(t testing.TB, useTLS bool) *Frappe {
	t.Helper()
	f := &Frappe{
		APIKey: "k" + testservers.RandomHex(6), APISecret: "s" + testservers.RandomHex(12), Bearer: "oauth-" + testservers.RandomHex(16),
		docs: map[string][]map[string]any{},
	}
	srv, ca := start(t, f, useTLS)
	f.URL, f.CAFile = srv.URL, ca
	f.client = clientFor(t, ca)
	return f
}

// Token is the value of the Authorization header for token auth.
func (f *Frappe) Token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenLocked()
}

func (f *Frappe) tokenLocked() string { return "token " + f.APIKey + ":" + f.APISecret }

// Rotate replaces the API secret and the bearer token, as an administrator
// revoking the old credentials does.
func (f *Frappe) Rotate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.APISecret = "s" + testservers.RandomHex(12)
	f.Bearer = "oauth-" + testservers.RandomHex(16)
}

// EchoAuth makes refusals quote the credential presented, as a server left
// in debug mode does.
func (f *Frappe) EchoAuth(on bool) { f.echoAuth.Set(on) }

// Post creates a document through the API, as the automation would, and
// returns its name.
func (f *Frappe) Post(t testing.TB, doctype string, doc map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(doc)
	req, err := http.NewRequest(http.MethodPost, f.URL+"/api/resource/"+url.PathEscape(doctype), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", f.Token())
	req.Header.Set("Content-Type", "application/json")
	res, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Data map[string]any `json:"data"`
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("POST %s: %d %s", doctype, res.StatusCode, raw)
	}
	return out.Data["name"].(string)
}

// Insert stores a document directly (bulk seeding) and returns its name.
func (f *Frappe) Insert(doctype string, doc map[string]any) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.insertLocked(doctype, doc)
}

func (f *Frappe) insertLocked(doctype string, doc map[string]any) string {
	f.seq++
	d := make(map[string]any, len(doc)+5)
	maps.Copy(d, doc)
	now := time.Now().UTC().Format(FrappeTime)
	d["name"] = fmt.Sprintf("HLC-ENC-2026-%05d", f.seq)
	d["doctype"] = doctype
	d["docstatus"] = json.Number("0")
	d["owner"] = "automation@example.com"
	if _, ok := d["creation"]; !ok {
		d["creation"] = now
	}
	if _, ok := d["modified"]; !ok {
		d["modified"] = now
	}
	d["_seq"] = f.seq
	f.docs[doctype] = append(f.docs[doctype], d)
	return d["name"].(string)
}

// Reset deletes every document of doctype.
func (f *Frappe) Reset(doctype string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.docs, doctype)
}

// Names lists the names of doctype's documents in creation order.
func (f *Frappe) Names(doctype string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.docs[doctype] {
		out = append(out, d["name"].(string))
	}
	return out
}

// Count returns how many documents of doctype have field equal to value.
func (f *Frappe) Count(doctype, field string, value any) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.docs[doctype] {
		if d[field] == value {
			n++
		}
	}
	return n
}

func (f *Frappe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.apply(w, r) {
		return
	}
	if !f.authorized(w, r) {
		return
	}
	if st := f.failure(); st != 0 {
		writeJSON(w, st, map[string]any{
			"exception": "pymysql.err.OperationalError: (2013, 'Lost connection to MySQL server during query')",
			"exc_type":  "OperationalError",
			"exc":       `["Traceback (most recent call last):\n  File \"apps/frappe/frappe/app.py\", line 95, in application\n    response = frappe.api.handle()\npymysql.err.OperationalError: (2013, 'Lost connection to MySQL server during query')\n"]`,
		})
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/resource/"):
		doctype, name, ok := resourceSegments(r.URL.EscapedPath())
		switch {
		case !ok:
			writeJSON(w, http.StatusBadRequest, map[string]any{"exc_type": "ValidationError", "exception": "malformed path escape"})
		case r.Method == http.MethodGet && name == "":
			f.list(w, r, doctype)
		case r.Method == http.MethodGet:
			f.get(w, doctype, name)
		case r.Method == http.MethodPost && name == "":
			f.create(w, r, doctype)
		case r.Method == http.MethodDelete && name != "":
			f.remove(w, doctype, name)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"exc_type": "MethodNotAllowed"})
		}
	case strings.HasPrefix(r.URL.Path, "/api/cursor/") && r.Method == http.MethodGet:
		f.cursor(w, r, strings.TrimPrefix(r.URL.Path, "/api/cursor/"))
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"exc_type": "DoesNotExistError", "exception": "Page not found"})
	}
}

// resourceSegments splits an escaped /api/resource/{doctype}[/{name}] path
// into its two segments, each unescaped on its own, so a doctype or name
// holding an escaped '/' (%2F) stays one segment.
func resourceSegments(escaped string) (doctype, name string, ok bool) {
	rawType, rawName, _ := strings.Cut(strings.TrimPrefix(escaped, "/api/resource/"), "/")
	doctype, err1 := url.PathUnescape(rawType)
	name, err2 := url.PathUnescape(rawName)
	return doctype, name, err1 == nil && err2 == nil
}

func (f *Frappe) authorized(w http.ResponseWriter, r *http.Request) bool {
	got := r.Header.Get("Authorization")
	f.mu.Lock()
	token, bearer := f.tokenLocked(), "Bearer "+f.Bearer
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(f.APIKey+":"+f.APISecret))
	f.mu.Unlock()
	switch got {
	case token, basic, bearer:
		return true
	case "":
		writeJSON(w, http.StatusForbidden, map[string]any{
			"exc_type":         "PermissionError",
			"exception":        "frappe.exceptions.PermissionError: Not permitted",
			"_server_messages": `["{\"message\": \"Not permitted\", \"title\": \"Message\", \"indicator\": \"red\"}"]`,
		})
		return false
	}
	msg := "Invalid authentication token"
	if f.echoAuth.Get() {
		msg += " (presented: " + got + ")"
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{
		"exc_type":         "AuthenticationError",
		"exception":        "frappe.exceptions.AuthenticationError: " + msg,
		"_server_messages": `["{\"message\": \"` + strings.ReplaceAll(msg, `"`, `'`) + `\"}"]`,
	})
	return false
}

func (f *Frappe) list(w http.ResponseWriter, r *http.Request, doctype string) {
	q := r.URL.Query()
	fields := []string{"name"}
	if v := q.Get("fields"); v != "" {
		fields = nil
		if err := json.Unmarshal([]byte(v), &fields); err != nil {
			frappeValidation(w, "fields must be a JSON list: "+err.Error())
			return
		}
	}
	filters, err := parseFilters(doctype, q.Get("filters"))
	if err != nil {
		frappeValidation(w, err.Error())
		return
	}
	start, _ := strconv.Atoi(q.Get("limit_start"))
	length := 20
	if n := f.defaultPage.Get(); n > 0 {
		length = n
	}
	if v := q.Get("limit_page_length"); v != "" {
		length, _ = strconv.Atoi(v)
	}
	if c := f.pageCap.Get(); c > 0 && (length <= 0 || length > c) {
		length = c
	}
	order := q.Get("order_by")
	if order == "" {
		order = "modified desc"
	}

	f.mu.Lock()
	var matched []map[string]any
	for _, d := range f.docs[doctype] {
		if filters(d) {
			matched = append(matched, d)
		}
	}
	f.mu.Unlock()
	sortDocs(matched, order)
	total := len(matched)
	if start > len(matched) {
		start = len(matched)
	}
	matched = matched[start:]
	if length > 0 && length < len(matched) {
		matched = matched[:length]
	}
	out := make([]map[string]any, len(matched))
	for i, d := range matched {
		out[i] = project(d, fields)
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(total))
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "total_count": total})
}

// cursor is a list with next-link paging: each page carries links.next.
func (f *Frappe) cursor(w http.ResponseWriter, r *http.Request, doctype string) {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("page_size"))
	if size <= 0 {
		size = 20
	}
	after, _ := strconv.Atoi(q.Get("after"))
	f.mu.Lock()
	var page []map[string]any
	more := false
	for _, d := range f.docs[doctype] {
		if d["_seq"].(int) <= after || !matchQuery(d, q) {
			continue
		}
		if len(page) == size {
			more = true
			break
		}
		page = append(page, project(d, []string{"*"}))
	}
	f.mu.Unlock()
	links := map[string]any{"next": nil}
	if more {
		nq := url.Values{}
		maps.Copy(nq, q)
		nq.Set("after", strconv.Itoa(lastSeq(f, doctype, page)))
		links["next"] = "/api/cursor/" + url.PathEscape(doctype) + "?" + nq.Encode()
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": page, "links": links})
}

func lastSeq(f *Frappe, doctype string, page []map[string]any) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := page[len(page)-1]["name"]
	for _, d := range f.docs[doctype] {
		if d["name"] == name {
			return d["_seq"].(int)
		}
	}
	return 0
}

func matchQuery(d map[string]any, q url.Values) bool {
	for k, v := range q {
		if k == "page_size" || k == "after" {
			continue
		}
		if text(d[k]) != v[0] {
			return false
		}
	}
	return true
}

func (f *Frappe) get(w http.ResponseWriter, doctype, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.docs[doctype] {
		if d["name"] == name {
			writeJSON(w, http.StatusOK, map[string]any{"data": project(d, []string{"*"})})
			return
		}
	}
	frappeNotFound(w, doctype, name)
}

func (f *Frappe) create(w http.ResponseWriter, r *http.Request, doctype string) {
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		frappeValidation(w, "the body must be a JSON document")
		return
	}
	f.mu.Lock()
	f.insertLocked(doctype, doc)
	out := project(f.docs[doctype][len(f.docs[doctype])-1], []string{"*"})
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (f *Frappe) remove(w http.ResponseWriter, doctype, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	docs := f.docs[doctype]
	for i, d := range docs {
		if d["name"] == name {
			f.docs[doctype] = append(docs[:i:i], docs[i+1:]...)
			writeJSON(w, http.StatusAccepted, map[string]any{"message": "ok"})
			return
		}
	}
	frappeNotFound(w, doctype, name)
}

func frappeNotFound(w http.ResponseWriter, doctype, name string) {
	writeJSON(w, http.StatusNotFound, map[string]any{
		"exc_type":  "DoesNotExistError",
		"exception": fmt.Sprintf("frappe.exceptions.DoesNotExistError: %s %s not found", doctype, name),
	})
}

func frappeValidation(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusExpectationFailed, map[string]any{
		"exc_type":  "ValidationError",
		"exception": "frappe.exceptions.ValidationError: " + msg,
	})
}

// parseFilters reads Frappe's filters: [[doctype, field, op, value], ...],
// [[field, op, value], ...] or {field: value}. Operators = and !=.
func parseFilters(doctype, raw string) (func(map[string]any) bool, error) {
	type cond struct{ field, op, value string }
	var conds []cond
	if raw != "" {
		var v any
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("filters must be JSON: %v", err)
		}
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				conds = append(conds, cond{k, "=", text(val)})
			}
		case []any:
			for _, e := range x {
				parts, ok := e.([]any)
				if ok && len(parts) == 4 {
					parts = parts[1:]
				}
				if !ok || len(parts) != 3 {
					return nil, fmt.Errorf("a filter must be [field, operator, value]")
				}
				conds = append(conds, cond{text(parts[0]), text(parts[1]), text(parts[2])})
			}
		default:
			return nil, fmt.Errorf("filters must be a list or a map")
		}
	}
	for _, c := range conds {
		if c.op != "=" && c.op != "!=" {
			return nil, fmt.Errorf("operator %q is not supported here", c.op)
		}
	}
	return func(d map[string]any) bool {
		for _, c := range conds {
			if (text(d[c.field]) == c.value) != (c.op == "=") {
				return false
			}
		}
		return true
	}, nil
}

func sortDocs(docs []map[string]any, order string) {
	field, dir, _ := strings.Cut(strings.TrimSpace(order), " ")
	desc := strings.EqualFold(strings.TrimSpace(dir), "desc")
	if field == "creation" && !desc {
		return // already in creation order
	}
	slices.SortStableFunc(docs, func(x, y map[string]any) int {
		c := cmp.Or(strings.Compare(text(x[field]), text(y[field])), cmp.Compare(x["_seq"].(int), y["_seq"].(int)))
		if desc {
			return -c
		}
		return c
	})
}

func project(d map[string]any, fields []string) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		if f == "*" {
			for k, v := range d {
				if k != "_seq" {
					out[k] = v
				}
			}
			continue
		}
		if v, ok := d[f]; ok {
			out[f] = v
		} else {
			out[f] = nil
		}
	}
	return out
}

func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return fmt.Sprint(v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// clientFor is an HTTP client that trusts caFile (plain HTTP when empty).
func clientFor(t testing.TB, caFile string) *http.Client {
	t.Helper()
	if caFile == "" {
		return &http.Client{Timeout: 30 * time.Second}
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

package httprecords

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/jsonobj"
	"github.com/verifierd/verifierd/internal/testservers"
)

//go:embed testdata/fhir/*.json
var fhirFixtures embed.FS

// FHIRFixture returns the bytes of a fixture under testdata/fhir, written
// from the FHIR R4 specification's examples (observation-example.json,
// patient-example.json, operationoutcome-*.json).
func FHIRFixture(name string) []byte {
	b, err := fhirFixtures.ReadFile("testdata/fhir/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// FHIRContentType is the media type of every FHIR answer.
const FHIRContentType = "application/fhir+json;charset=UTF-8"

// FHIR is a FHIR R4 server for Observation and Patient at <URL>: create
// (POST [base]/[type]), read, and search answering searchset Bundles with
// total, self/next/previous links and paging through a stored snapshot
// ([base]?_getpages=..., as HAPI does). Unknown search parameters are
// refused with an OperationOutcome (strict handling); a missing or wrong
// bearer token answers 401 with an OperationOutcome.
type FHIR struct {
	Faults
	// URL is the FHIR base (…/fhir); CAFile the PEM of its CA (TLS only).
	URL    string
	CAFile string
	Token  string

	client *http.Client

	mu           sync.Mutex
	resources    map[string][]*fhirResource
	seq          int
	snapshots    map[string][]*fhirResource
	snapSeq      int
	outcomeAt200 testservers.Setting[bool]
	outcomeEntry testservers.Setting[string]
}

type fhirResource struct {
	typ, id string
	raw     json.RawMessage
	doc     map[string]any
}

// NewFHIR starts the FHIR server for the test.
func NewFHIR(t testing.TB, useTLS bool) *FHIR {
	t.Helper()
	f := &FHIR{Token: "fhir-" + testservers.RandomHex(16), resources: map[string][]*fhirResource{}, snapshots: map[string][]*fhirResource{}}
	mux := http.NewServeMux()
	mux.Handle("/fhir", f)
	mux.Handle("/fhir/", f)
	srv, ca := start(t, mux, useTLS)
	f.URL, f.CAFile = srv.URL+"/fhir", ca
	f.client = clientFor(t, ca)
	return f
}

// OutcomeAt200 makes searches answer 200 with an OperationOutcome instead
// of a Bundle, as some servers do for a search they will not run.
func (f *FHIR) OutcomeAt200(on bool) { f.outcomeAt200.Set(on) }

// OutcomeEntry adds an OperationOutcome entry (search.mode outcome) of the
// given severity to every searchset ("" for none).
func (f *FHIR) OutcomeEntry(severity string) { f.outcomeEntry.Set(severity) }

// Observation is the R4 example Observation (body weight) for subject with
// the given status, issued instant and valueQuantity.value (kept as
// written; "" leaves the value out, as a partial save does), without an id.
func Observation(subject, status, issued, value string) []byte {
	fields, err := jsonobj.Split(FHIRFixture("observation-example.json"))
	if err != nil {
		panic(err)
	}
	q := mustJSON(map[string]any{"value": json.Number(value), "unit": "lbs", "system": "http://unitsofmeasure.org", "code": "[lb_av]"})
	fields = setField(fields, "subject", mustJSON(map[string]string{"reference": subject}))
	fields = setField(fields, "status", mustJSON(status))
	fields = setField(fields, "issued", mustJSON(issued))
	if value == "" {
		fields = dropField(fields, "valueQuantity")
	} else {
		fields = setField(fields, "valueQuantity", q)
	}
	fields = dropField(dropField(fields, "id"), "meta")
	return encodeFields(fields)
}

// Create posts a resource through the API, as the automation would, and
// returns its id.
func (f *FHIR) Create(t testing.TB, resourceType string, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/"+resourceType, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.token())
	req.Header.Set("Content-Type", "application/fhir+json")
	res, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct{ ID string }
	if res.StatusCode != http.StatusCreated || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("POST %s: %d %s", resourceType, res.StatusCode, raw)
	}
	return out.ID
}

// Store adds a resource directly (bulk seeding) and returns its id.
func (f *FHIR) Store(resourceType string, body []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.storeLocked(resourceType, body)
	if err != nil {
		panic(err)
	}
	return r.id
}

func (f *FHIR) storeLocked(resourceType string, body []byte) (*fhirResource, error) {
	fields, err := jsonobj.Split(body)
	if err != nil {
		return nil, err
	}
	f.seq++
	id := strconv.Itoa(f.seq)
	meta := mustJSON(map[string]string{"versionId": "1", "lastUpdated": time.Now().UTC().Format("2006-01-02T15:04:05.000-07:00")})
	fields = dropField(dropField(dropField(fields, "resourceType"), "id"), "meta")
	fields = append([]field{{Key: "resourceType", Value: mustJSON(resourceType)}, {Key: "id", Value: mustJSON(id)}, {Key: "meta", Value: meta}}, fields...)
	raw := encodeFields(fields)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	r := &fhirResource{typ: resourceType, id: id, raw: raw, doc: doc}
	f.resources[resourceType] = append(f.resources[resourceType], r)
	return r, nil
}

// Reset deletes every resource of resourceType.
func (f *FHIR) Reset(resourceType string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.resources, resourceType)
}

func (f *FHIR) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.apply(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token() {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fhir", error="invalid_token"`)
		writeFHIR(w, http.StatusUnauthorized, FHIRFixture("operationoutcome-unauthorized.json"))
		return
	}
	if st := f.failure(); st != 0 {
		writeFHIR(w, st, FHIRFixture("operationoutcome-exception.json"))
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/fhir"), "/")
	typ, id, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodGet && typ == "" && r.URL.Query().Get("_getpages") != "":
		f.page(w, r)
	case r.Method == http.MethodGet && (typ == "Observation" || typ == "Patient") && id == "":
		f.search(w, r, typ)
	case r.Method == http.MethodGet && id != "":
		f.read(w, typ, id)
	case r.Method == http.MethodPost && (typ == "Observation" || typ == "Patient") && id == "":
		f.create(w, r, typ)
	default:
		writeFHIR(w, http.StatusNotFound, outcome("error", "not-supported", fmt.Sprintf("Unknown resource type or operation: %s %s", r.Method, r.URL.Path)))
	}
}

func (f *FHIR) create(w http.ResponseWriter, r *http.Request, typ string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	res, err := f.storeLocked(typ, body)
	f.mu.Unlock()
	if err != nil {
		writeFHIR(w, http.StatusBadRequest, outcome("error", "structure", "Failed to parse request body as JSON resource: "+err.Error()))
		return
	}
	w.Header().Set("Location", f.URL+"/"+typ+"/"+res.id+"/_history/1")
	writeFHIR(w, http.StatusCreated, res.raw)
}

func (f *FHIR) read(w http.ResponseWriter, typ, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.resources[typ] {
		if r.id == id {
			writeFHIR(w, http.StatusOK, r.raw)
			return
		}
	}
	writeFHIR(w, http.StatusNotFound, outcome("error", "processing", fmt.Sprintf("Resource %s/%s is not known", typ, id)))
}

// searchParams are the supported parameters per resource type: each gives
// the values of a resource it matches against.
var searchParams = map[string]map[string]func(map[string]any) []string{
	"Observation": {
		"_id":     func(d map[string]any) []string { return []string{text(d["id"])} },
		"patient": func(d map[string]any) []string { return refs(d["subject"]) },
		"subject": func(d map[string]any) []string { return refs(d["subject"]) },
		"status":  func(d map[string]any) []string { return []string{text(d["status"])} },
		"code":    codes,
	},
	"Patient": {
		"_id":        func(d map[string]any) []string { return []string{text(d["id"])} },
		"family":     func(d map[string]any) []string { return listField(d["name"], "family") },
		"identifier": func(d map[string]any) []string { return listField(d["identifier"], "value") },
	},
}

func (f *FHIR) search(w http.ResponseWriter, r *http.Request, typ string) {
	q := r.URL.Query()
	count := 20
	type cond struct {
		get    func(map[string]any) []string
		values []string
		name   string
	}
	var conds []cond
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch name {
		case "_count":
			n, err := strconv.Atoi(q.Get(name))
			if err != nil || n < 1 {
				writeFHIR(w, http.StatusBadRequest, outcome("error", "processing", "Invalid _count value: "+q.Get(name)))
				return
			}
			count = n
			continue
		case "_sort", "_total", "_format":
			continue
		}
		get, ok := searchParams[typ][name]
		if !ok {
			writeFHIR(w, http.StatusBadRequest, outcome("error", "processing", fmt.Sprintf(
				"Unknown search parameter %q for resource type %q. Valid search parameters for this search are: %s", name, typ, strings.Join(slices.Sorted(maps.Keys(searchParams[typ])), ", "))))
			return
		}
		conds = append(conds, cond{get, q[name], name})
	}
	if f.outcomeAt200.Get() {
		writeFHIR(w, http.StatusOK, FHIRFixture("operationoutcome-too-costly.json"))
		return
	}
	f.mu.Lock()
	var snap []*fhirResource
	for _, res := range f.resources[typ] {
		ok := true
		for _, c := range conds {
			ok = ok && matchesAll(c.name, f.ownRelative(c.get(res.doc)), c.values)
		}
		if ok {
			snap = append(snap, res)
		}
	}
	f.snapSeq++
	id := fmt.Sprintf("%08x-%s", f.snapSeq, testservers.RandomHex(4))
	f.snapshots[id] = snap
	f.mu.Unlock()
	outcomeSeverity := f.outcomeEntry.Get()
	self := f.URL + "/" + typ
	if r.URL.RawQuery != "" {
		self += "?" + r.URL.RawQuery
	}
	f.writeBundle(w, id, snap, 0, count, self, outcomeSeverity)
}

func (f *FHIR) page(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err1 := strconv.Atoi(q.Get("_getpagesoffset"))
	count, err2 := strconv.Atoi(q.Get("_count"))
	f.mu.Lock()
	snap, ok := f.snapshots[q.Get("_getpages")]
	f.mu.Unlock()
	outcomeSeverity := f.outcomeEntry.Get()
	if !ok || err1 != nil || err2 != nil || offset < 0 || count < 1 {
		writeFHIR(w, http.StatusGone, outcome("error", "processing", "Search id "+q.Get("_getpages")+" does not exist and may have expired"))
		return
	}
	f.writeBundle(w, q.Get("_getpages"), snap, offset, count, f.URL+"?"+r.URL.RawQuery, outcomeSeverity)
}

type bundleLink struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

type bundleEntry struct {
	FullURL  string          `json:"fullUrl,omitempty"`
	Resource json.RawMessage `json:"resource"`
	Search   struct {
		Mode string `json:"mode"`
	} `json:"search"`
}

type bundle struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	Meta         struct {
		LastUpdated string `json:"lastUpdated"`
	} `json:"meta"`
	Type  string        `json:"type"`
	Total int           `json:"total"`
	Link  []bundleLink  `json:"link"`
	Entry []bundleEntry `json:"entry,omitempty"`
}

func (f *FHIR) writeBundle(w http.ResponseWriter, id string, snap []*fhirResource, offset, count int, self, outcomeSeverity string) {
	b := bundle{ResourceType: "Bundle", ID: id, Type: "searchset", Total: len(snap)}
	b.Meta.LastUpdated = time.Now().UTC().Format("2006-01-02T15:04:05.000-07:00")
	b.Link = append(b.Link, bundleLink{"self", self})
	pageURL := func(off int) string {
		v := url.Values{"_getpages": {id}, "_getpagesoffset": {strconv.Itoa(off)}, "_count": {strconv.Itoa(count)}, "_bundletype": {"searchset"}}
		return f.URL + "?" + v.Encode()
	}
	if offset+count < len(snap) {
		b.Link = append(b.Link, bundleLink{"next", pageURL(offset + count)})
	}
	if offset > 0 {
		b.Link = append(b.Link, bundleLink{"previous", pageURL(max(0, offset-count))})
	}
	end := min(len(snap), offset+count)
	for _, res := range snap[min(offset, end):end] {
		e := bundleEntry{FullURL: f.URL + "/" + res.typ + "/" + res.id, Resource: res.raw}
		e.Search.Mode = "match"
		b.Entry = append(b.Entry, e)
	}
	if outcomeSeverity != "" {
		e := bundleEntry{Resource: outcome(outcomeSeverity, "informational", "The search ran against a replica that may lag the primary")}
		e.Search.Mode = "outcome"
		b.Entry = append(b.Entry, e)
	}
	body, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		writeFHIR(w, http.StatusInternalServerError, outcome("fatal", "exception", err.Error()))
		return
	}
	writeFHIR(w, http.StatusOK, body)
}

func outcome(severity, code, diagnostics string) []byte {
	return mustJSON(map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []any{map[string]any{"severity": severity, "code": code, "diagnostics": diagnostics}},
	})
}

func writeFHIR(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", FHIRContentType)
	w.WriteHeader(status)
	w.Write(body)
}

// ownRelative is have with every absolute reference to this server's base
// in its relative form: a search for subject=Patient/p1 finds an
// Observation saved with http://[base]/Patient/p1, as a real server's
// does (HAPI FHIR stores such references relative). The resource itself
// keeps the spelling it was saved with.
func (f *FHIR) ownRelative(have []string) []string {
	out := make([]string, len(have))
	for i, h := range have {
		out[i] = strings.TrimPrefix(h, f.URL+"/")
	}
	return out
}

func matchesAll(name string, have, want []string) bool {
	for _, wv := range want {
		for alt := range strings.SplitSeq(wv, ",") { // a comma is OR in FHIR search
			if (name == "patient" || name == "subject") && !strings.Contains(alt, "/") {
				alt = "Patient/" + alt
			}
			for _, h := range have {
				if h == alt {
					goto next
				}
			}
		}
		return false
	next:
	}
	return true
}

func refs(v any) []string {
	if m, ok := v.(map[string]any); ok {
		return []string{text(m["reference"])}
	}
	return nil
}

func codes(d map[string]any) []string {
	var out []string
	code, _ := d["code"].(map[string]any)
	list, _ := code["coding"].([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, text(m["code"]), text(m["system"])+"|"+text(m["code"]))
		}
	}
	return out
}

func listField(v any, key string) []string {
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, text(m[key]))
		}
	}
	return out
}

// field is one member of a JSON object, its value byte for byte.
type field = jsonobj.Member

func setField(fs []field, key string, v json.RawMessage) []field {
	for i := range fs {
		if fs[i].Key == key {
			fs[i].Value = v
			return fs
		}
	}
	return append(fs, field{Key: key, Value: v})
}

func dropField(fs []field, key string) []field {
	out := fs[:0:0]
	for _, f := range fs {
		if f.Key != key {
			out = append(out, f)
		}
	}
	return out
}

func encodeFields(fs []field) []byte {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fs {
		k, _ := json.Marshal(f.Key)
		b.WriteString("  ")
		b.Write(k)
		b.WriteString(": ")
		b.Write(f.Value)
		if i < len(fs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.Bytes()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Rotate replaces the accepted bearer token: the old one is refused from
// now on, as after a revocation.
func (f *FHIR) Rotate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Token = "fhir-" + testservers.RandomHex(16)
}

func (f *FHIR) token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Token
}

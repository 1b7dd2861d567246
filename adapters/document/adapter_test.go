package document

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-document, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/document", Kind, &pluginBinary)
}

func section(t testing.TB, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inProcess(t testing.TB) *adaptertest.Instance {
	t.Helper()
	return adaptertest.InProcess(t, New)
}

func configured(t testing.TB, cfg map[string]any) *adaptertest.Instance {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, cfg)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

func write(t testing.TB, root, rel, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func captureAll(t testing.TB, c *adaptertest.Instance) (*adaptertest.Stream, []sdk.Record) {
	t.Helper()
	capt, err := c.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "t", Timeout: time.Minute})
	if err != nil {
		t.Fatalf("CaptureAfter returned an error: %v", err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("reading the records: %v", err)
	}
	return capt, recs
}

// parsed drops the fields every record has, leaving what was parsed plus
// parseable (and whether parse_error is set).
func parsed(r sdk.Record) map[string]any {
	out := map[string]any{}
	for k, v := range r {
		switch k {
		case "id", "name", "path", "size", "mtime":
		case "parse_error":
			out[k] = v != ""
		default:
			out[k] = v
		}
	}
	return out
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "document" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("Info = %+v", info.Info)
	}
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      map[string]any
		wantPath string
		wantMsg  string
	}{
		{"no root", map[string]any{}, "root", "missing"},
		{"unknown key", map[string]any{"root": "/d", "document_fields": map[string]string{}}, "document_fields", "unknown key for kind document"},
		{"wrong kind", map[string]any{"kind": "file", "root": "/d"}, "kind", `not "file"`},
		{"bad format", map[string]any{"root": "/d", "document_format": "xml"}, "document_format", "json or text"},
		{"bad pattern", map[string]any{"root": "/d", "file_pattern": "a/**/b"}, "file_pattern", "** is not supported"},
		{"bad window", map[string]any{"root": "/d", "file_mtime_window_s": "soon"}, "file_mtime_window_s", "must be a number"},
		{"json with a text pattern", map[string]any{"root": "/d", "document_text_pattern": "(?P<a>x)"}, "document_text_pattern", "document_format: text"},
		{"empty field paths", map[string]any{"root": "/d", "document_field_paths": map[string]string{}}, "document_field_paths", "is empty"},
		{"reserved field", map[string]any{"root": "/d", "document_field_paths": map[string]string{"id": "order.id"}}, "document_field_paths.id", "sets itself"},
		{"empty path segment", map[string]any{"root": "/d", "document_field_paths": map[string]string{"sku": "items..sku"}}, "document_field_paths.sku", "not a dotted path"},
		{"text without a pattern", map[string]any{"root": "/d", "document_format": "text"}, "document_text_pattern", "missing"},
		{"text with field paths", map[string]any{"root": "/d", "document_format": "text", "document_text_pattern": "(?P<a>x)", "document_field_paths": map[string]string{"a": "b"}}, "document_field_paths", "document_format: json"},
		{"text pattern without groups", map[string]any{"root": "/d", "document_format": "text", "document_text_pattern": "Order (\\d+)"}, "document_text_pattern", "no named group"},
		{"reserved group", map[string]any{"root": "/d", "document_format": "text", "document_text_pattern": "(?P<parseable>x)"}, "document_text_pattern", "sets itself"},
		{"bad regex", map[string]any{"root": "/d", "document_format": "text", "document_text_pattern": "(?P<a>x"}, "document_text_pattern", "not a valid regular expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, tt.cfg)})
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q; want path %q and %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestJSONDocuments(t *testing.T) {
	t.Parallel()
	paths := map[string]string{"order": "order.id", "sku": "items.0.sku", "qty": "items.0.qty", "total": "total", "customer": "customer"}
	tests := []struct {
		name  string
		paths map[string]string // nil: the top-level keys
		doc   string
		want  map[string]any
	}{
		{"dotted paths and array indexes", paths,
			`{"order": {"id": "42"}, "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2"}], "total": 100.50, "customer": {"name": "Zoë", "tier": 1}}`,
			map[string]any{"parseable": true, "order": "42", "sku": "A-1", "qty": json.Number("2"), "total": json.Number("100.50"),
				"customer": map[string]any{"name": "Zoë", "tier": json.Number("1")}}},
		{"a path that leads nowhere leaves its field out", paths,
			`{"order": {"id": 42}, "items": []}`,
			map[string]any{"parseable": true, "order": json.Number("42")}},
		{"an index must be a plain index", map[string]string{"first": "items.00", "neg": "items.-1", "ok": "items.1"},
			`{"items": ["a", "b"]}`,
			map[string]any{"parseable": true, "ok": "b"}},
		{"top-level keys by default; the adapter's own names are prefixed", nil,
			`{"order": "42", "id": "INV-7", "status": "sent", "lines": [1, 2]}`,
			map[string]any{"parseable": true, "order": "42", "document.id": "INV-7", "status": "sent", "lines": []any{json.Number("1"), json.Number("2")}}},
		{"corrupt JSON", paths, `{"order": {"id": "42"}, "items": [`,
			map[string]any{"parseable": false, "parse_error": true}},
		{"something after the value", paths, `{"order": {"id": "42"}} {"order": {"id": "43"}}`,
			map[string]any{"parseable": false, "parse_error": true}},
		{"empty file", paths, ``,
			map[string]any{"parseable": false, "parse_error": true}},
		{"a JSON array has no top-level keys", nil, `[{"order": "42"}]`,
			map[string]any{"parseable": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, root, "confirmation-1.json", tt.doc, time.Time{})
			cfg := map[string]any{"root": root, "file_pattern": "confirmation-*.json", "document_format": "json"}
			if tt.paths != nil {
				cfg["document_field_paths"] = tt.paths
			}
			_, recs := captureAll(t, configured(t, cfg))
			if len(recs) != 1 {
				t.Fatalf("%d records; want 1 (a document is never skipped)", len(recs))
			}
			if diff := cmp.Diff(tt.want, parsed(recs[0])); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTextDocuments(t *testing.T) {
	t.Parallel()
	pattern := `(?m)^Order: (?P<order>\d+)$\s+^Total: (?P<total>[0-9.]+) (?P<currency>EUR|USD)$(?:\s+^Note: (?P<note>.*)$)?`
	tests := []struct {
		name string
		doc  string
		want map[string]any
	}{
		{"every group", "Report\nOrder: 42\nTotal: 100.50 EUR\nNote: paid\n",
			map[string]any{"parseable": true, "order": "42", "total": "100.50", "currency": "EUR", "note": "paid"}},
		{"an optional group that did not take part is left out", "Order: 43\nTotal: 7 USD\n",
			map[string]any{"parseable": true, "order": "43", "total": "7", "currency": "USD"}},
		{"the first match counts", "Order: 1\nTotal: 1 EUR\nOrder: 2\nTotal: 2 EUR\n",
			map[string]any{"parseable": true, "order": "1", "total": "1", "currency": "EUR"}},
		{"no match does not parse", "Order: 42\nTotal: lots\n",
			map[string]any{"parseable": false, "parse_error": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, root, "report.txt", tt.doc, time.Time{})
			_, recs := captureAll(t, configured(t, map[string]any{"root": root, "document_format": "text", "document_text_pattern": pattern}))
			if len(recs) != 1 {
				t.Fatalf("%d records; want 1", len(recs))
			}
			if diff := cmp.Diff(tt.want, parsed(recs[0])); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFolderStates: the states of an export folder that fool a naive check,
// read through the selector a contract would use.
func TestFolderStates(t *testing.T) {
	t.Parallel()
	good := `{"order": {"id": "42"}, "items": [{"sku": "A-1"}]}`
	old := time.Now().Add(-3 * time.Hour)
	type doc struct {
		rel     string
		content string
		mtime   time.Time
	}
	selector := map[string]string{"order": "42", "parseable": "true"}
	tests := []struct {
		name      string
		docs      []doc
		wantMatch []string          // ids matching selector
		wantOther map[string]string // id -> parseable/fresh summary of every record
	}{
		{"one good report", []doc{{"confirmation-1.json", good, time.Time{}}},
			[]string{"confirmation-1.json"}, map[string]string{"confirmation-1.json": "parseable=true fresh=true"}},
		{"corrupt JSON is a record that does not match", []doc{{"confirmation-1.json", `{"order": {"id": "42"`, time.Time{}}},
			nil, map[string]string{"confirmation-1.json": "parseable=false fresh=true"}},
		{"wrong entity", []doc{{"confirmation-1.json", `{"order": {"id": "43"}}`, time.Time{}}},
			nil, map[string]string{"confirmation-1.json": "parseable=true fresh=true"}},
		{"duplicates are two records", []doc{{"confirmation-1.json", good, time.Time{}}, {"confirmation-2.json", good, time.Time{}}},
			[]string{"confirmation-1.json", "confirmation-2.json"},
			map[string]string{"confirmation-1.json": "parseable=true fresh=true", "confirmation-2.json": "parseable=true fresh=true"}},
		{"stale mtime", []doc{{"confirmation-1.json", good, old}},
			[]string{"confirmation-1.json"}, map[string]string{"confirmation-1.json": "parseable=true fresh=false"}},
		{"files the pattern does not select are not read", []doc{{"confirmation-1.json", good, time.Time{}}, {"draft-1.json", good, time.Time{}}, {"sub/confirmation-2.json", good, time.Time{}}},
			[]string{"confirmation-1.json"}, map[string]string{"confirmation-1.json": "parseable=true fresh=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for _, d := range tt.docs {
				write(t, root, d.rel, d.content, d.mtime)
			}
			c := configured(t, map[string]any{"root": root, "file_pattern": "confirmation-*.json", "document_field_paths": map[string]string{"order": "order.id"}, "file_mtime_window_s": 3600})
			capt, recs := captureAll(t, c)
			if !capt.Reachable {
				t.Fatal(capt.Reason)
			}
			var matched []string
			summary := map[string]string{}
			for _, r := range recs {
				id := r["id"].(string)
				summary[id] = fmt.Sprintf("parseable=%v fresh=%v", r["parseable"], r["fresh"])
				if adaptertestMatches(r, selector) {
					matched = append(matched, id)
				}
			}
			if diff := cmp.Diff(tt.wantMatch, matched); diff != "" {
				t.Errorf("records matching %v (-want +got):\n%s", selector, diff)
			}
			if diff := cmp.Diff(tt.wantOther, summary); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// adaptertestMatches compares as the judge does: booleans read as
// true/false, a missing field matches nothing.
func adaptertestMatches(r sdk.Record, selector map[string]string) bool {
	for k, want := range selector {
		v, ok := r[k]
		if !ok || fmt.Sprint(v) != want {
			return false
		}
	}
	return true
}

func TestTooLargeDocument(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "huge.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxDocumentBytes + 1); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	_, recs := captureAll(t, configured(t, map[string]any{"root": root}))
	if len(recs) != 1 || recs[0]["parseable"] != false || !strings.Contains(fmt.Sprint(recs[0]["parse_error"]), "larger than") {
		t.Errorf("records %v; want one not parseable, larger than the limit", recs)
	}
}

func TestRootGone(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "exports")
	c := configured(t, map[string]any{"root": root})
	if res, err := c.TestConnection(t.Context()); err != nil || res.Reachable {
		t.Errorf("TestConnection on a missing folder = %+v, %v", res, err)
	}
	capt, _ := captureAll(t, c)
	if capt.Reachable || !strings.Contains(capt.Reason, root) {
		t.Errorf("missing folder: reachable=%v reason %q", capt.Reachable, capt.Reason)
	}
}

// exportFolder is the kit's handle on a real folder of JSON confirmations.
// The selected entity is order 42, parseable.
type exportFolder struct {
	root string
	mu   sync.Mutex
	next int
}

func (e *exportFolder) name() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	return fmt.Sprintf("confirmation-%06d.json", e.next)
}

func (e *exportFolder) put(t *testing.T, order string, mtime time.Time) string {
	t.Helper()
	name := e.name()
	tmp := filepath.Join(e.root, name+".part")
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`{"order": {"id": %q}, "items": [{"sku": "A-1"}]}`, order)), 0o644); err != nil {
		t.Error(err)
		return name
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Error(err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(e.root, name)); err != nil {
		t.Error(err)
	}
	return name
}

func qualify(t *testing.T, binary string) {
	e := &exportFolder{root: filepath.Join(t.TempDir(), "exports")}
	if err := os.Mkdir(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	config := func(root string) sdk.ConfigureRequest {
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, map[string]any{
			"kind": Kind, "root": root, "file_pattern": "confirmation-*.json",
			"document_format": "json", "document_field_paths": map[string]string{"order": "order.id", "sku": "items.0.sku"},
		})}
	}
	h := adaptertest.Harness{
		Binary: binary,
		Config: func(t *testing.T) sdk.ConfigureRequest { return config(e.root) },
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest {
			if os.Geteuid() == 0 {
				t.Skip("a folder has no credentials but its permissions, which root bypasses")
			}
			locked := filepath.Join(t.TempDir(), "locked")
			if err := os.Mkdir(locked, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
			return config(locked)
		},
		Selector:      map[string]string{"order": "42", "parseable": "true"},
		IdentityField: "id",
		Reset: func(t *testing.T) {
			entries, err := os.ReadDir(e.root)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range entries {
				if err := os.RemoveAll(filepath.Join(e.root, d.Name())); err != nil {
					t.Fatal(err)
				}
			}
		},
		WriteCorrect:     func(t *testing.T) string { return e.put(t, "42", time.Time{}) },
		WriteWrongEntity: func(t *testing.T) string { return e.put(t, "43", time.Time{}) },
		WriteDuplicate:   func(t *testing.T) string { return e.put(t, "42", time.Time{}) },
		WriteStale: func(t *testing.T) (string, string) {
			e.put(t, "42", time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
			return "mtime", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				e.put(t, "42", time.Time{})
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, reachable bool) {
			away := e.root + ".away"
			from, to := e.root, away
			if reachable {
				from, to = away, e.root
			}
			if _, err := os.Stat(from); err != nil {
				return
			}
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) {
			for range n {
				if err := os.WriteFile(filepath.Join(e.root, e.name()), []byte(`{"order": {"id": "42"}}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	if binary == "" {
		h.Factory = New
	}
	adaptertest.Run(t, h)
}

func TestQualificationInProcess(t *testing.T) { qualify(t, "") }

func TestQualificationBinary(t *testing.T) { qualify(t, pluginBinary) }

// TestFieldPathLookup pins what a dotted path gives: a JSON null at its end
// is the field's (null) value; a path through a null, a missing key, a
// scalar or an index that is not plain digits in range gives no field.
func TestFieldPathLookup(t *testing.T) {
	t.Parallel()
	doc := map[string]any{
		"a":     map[string]any{"b": nil, "c": "x"},
		"n":     nil,
		"items": []any{map[string]any{"sku": "S1"}},
	}
	for _, tt := range []struct {
		path    string
		want    any
		present bool
	}{
		{"a.c", "x", true},
		{"a.b", nil, true},
		{"n", nil, true},
		{"n.x", nil, false},
		{"a.missing", nil, false},
		{"a.c.d", nil, false},
		{"items.0.sku", "S1", true},
		{"items.00.sku", nil, false},
		{"items.-1.sku", nil, false},
		{"items.1.sku", nil, false},
	} {
		got, ok := fieldPath{field: "f", path: strings.Split(tt.path, ".")}.lookup(doc)
		if ok != tt.present || got != tt.want {
			t.Errorf("%s: got %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.present)
		}
	}
}

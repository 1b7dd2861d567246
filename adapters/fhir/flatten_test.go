package fhir

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// FuzzFlatten feeds the field_paths flattener arbitrary resources and
// paths. It must never panic; a path it accepts is made of non-empty
// segments; a number it returns keeps the exact text it had in the
// resource; and a one-segment path reads exactly that top-level key.
func FuzzFlatten(f *testing.F) {
	f.Add(string(httprecords.FHIRFixture("observation-example.json")), "valueQuantity.value")
	f.Add(string(httprecords.FHIRFixture("observation-example.json")), "code.coding.1.code")
	f.Add(string(httprecords.FHIRFixture("patient-example.json")), "name.0.given.1")
	f.Add(`{"a":[1.50,{"b":null}]}`, "a.1.b")
	f.Add(`{"a":{"0":"key, not index"}}`, "a.0")
	f.Add(`{"n":1e400}`, "n")
	f.Add(`{"a":[1]}`, "a.00")
	f.Add(`{}`, "a..b")
	f.Fuzz(func(t *testing.T, doc, path string) {
		fp, err := parseFieldPaths(map[string]string{"x": path})
		if err != nil {
			return
		}
		for _, seg := range fp["x"] {
			if seg == "" {
				t.Fatalf("accepted %q with an empty segment", path)
			}
		}
		v, err := httpx.DecodeJSON([]byte(doc))
		res, ok := v.(map[string]any)
		if err != nil || !ok {
			return
		}
		rec := fp.flatten(res)
		got, present := rec["x"]
		if n, isNum := got.(json.Number); isNum && !bytes.Contains([]byte(doc), []byte(n.String())) {
			t.Fatalf("number %q is not text of the resource %q", n, doc)
		}
		if len(fp["x"]) == 1 {
			want, has := res[path]
			if has && want != nil {
				wantJSON, _ := json.Marshal(want)
				gotJSON, _ := json.Marshal(got)
				if !present || !bytes.Equal(wantJSON, gotJSON) {
					t.Fatalf("path %q read %s (present %v), want %s", path, gotJSON, present, wantJSON)
				}
			} else if present {
				t.Fatalf("path %q to a missing or null key read %v", path, got)
			}
		}
		if !strings.Contains(path, ".") && len(rec) > 1 {
			t.Fatalf("one path made %d fields", len(rec))
		}
	})
}

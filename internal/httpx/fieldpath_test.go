package httpx

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// TestFieldPaths: dotted keys, an index (as a segment or in brackets), and
// an element of an array of objects selected by a key, with dots inside the
// selector's value; a path that leads nowhere leaves the field out, and a
// selector two elements satisfy fails the record.
func TestFieldPaths(t *testing.T) {
	doc := `{"id": 7, "project": {"id": 3, "name": "Loans"},
		"custom_fields": [{"id": 1, "name": "Claim", "value": "C-1"}, {"id": 2, "name": "Amount", "value": "12.50"}],
		"identifier": [{"system": "http://loinc.org", "value": "L-9"}, {"system": "urn:claims", "value": "UC-4"}],
		"flags": [{"on": true, "v": "yes"}], "twice": [{"k": "a", "v": 1}, {"k": "a", "v": 2}], "n": null}`
	v, err := DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := ParseFieldPaths("field_paths", map[string]string{
		"project":   "project.name",
		"claim_no":  "custom_fields[id=1].value",
		"amount":    "custom_fields[name=Amount].value",
		"second":    "custom_fields.1.id",
		"first":     "custom_fields[0].name",
		"loinc":     "identifier[system=http://loinc.org].value",
		"claims":    "identifier[system=urn:claims].value",
		"flag":      "flags[on=true].v",
		"absent":    "custom_fields[id=9].value",
		"null":      "n",
		"not_array": "project[id=3].name",
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fp.Flatten(v.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"project": "Loans", "claim_no": "C-1", "amount": "12.50", "second": "2", "first": "Claim", "loinc": "L-9", "claims": "UC-4", "flag": "yes"}
	for k, w := range want {
		got, ok := rec[k]
		if !ok {
			t.Errorf("%s: missing", k)
			continue
		}
		if s, _ := json.Marshal(got); strings.Trim(string(s), `"`) != w {
			t.Errorf("%s = %s, want %s", k, s, w)
		}
	}
	for _, k := range []string{"absent", "null", "not_array"} {
		if got, ok := rec[k]; ok {
			t.Errorf("%s = %v, want the field left out", k, got)
		}
	}
	if len(rec) != len(want) {
		t.Errorf("record has %d fields, want %d: %v", len(rec), len(want), rec)
	}

	amb, err := ParseFieldPaths("field_paths", map[string]string{"v": "twice[k=a].v"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := amb.Flatten(v.(map[string]any)); err == nil || !strings.Contains(err.Error(), "2 elements have k=a") {
		t.Fatalf("an ambiguous selector: err = %v, want the two elements named", err)
	}
}

// TestFieldPathRefused: a malformed path is refused at its field's path.
func TestFieldPathRefused(t *testing.T) {
	for _, p := range []string{"", "a..b", ".a", "a.", "a[", "a[id=1", "a[id]", "a[=1]", "a[id=]", "[id=1].v", "a[id=1]x", "a]b", "a[b[c=1]]", "a=b"} {
		_, err := ParseFieldPaths("field_paths", map[string]string{"claim_no": p})
		if err == nil {
			t.Errorf("%q was accepted", p)
			continue
		}
		if !strings.Contains(err.Error(), "field_paths.claim_no") {
			t.Errorf("%q: error %q does not name field_paths.claim_no", p, err)
		}
	}
}

// FuzzFlatten feeds the field_paths flattener arbitrary records and
// paths. It must never panic; a number it returns keeps the exact text it
// had in the record; and a one-segment path reads exactly that top-level
// key.
func FuzzFlatten(f *testing.F) {
	f.Add(string(httprecords.FHIRFixture("observation-example.json")), "valueQuantity.value")
	f.Add(string(httprecords.FHIRFixture("observation-example.json")), "code.coding.1.code")
	f.Add(string(httprecords.FHIRFixture("observation-example.json")), "code.coding[system=http://loinc.org].code")
	f.Add(string(httprecords.FHIRFixture("patient-example.json")), "name.0.given.1")
	f.Add(`{"a":[1.50,{"b":null}]}`, "a.1.b")
	f.Add(`{"a":{"0":"key, not index"}}`, "a.0")
	f.Add(`{"n":1e400}`, "n")
	f.Add(`{"a":[1]}`, "a.00")
	f.Add(`{}`, "a..b")
	f.Add(`{"a":[{"k":1,"v":2}]}`, "a[k=1].v")
	f.Fuzz(func(t *testing.T, doc, path string) {
		fp, err := ParseFieldPaths("field_paths", map[string]string{"x": path})
		if err != nil {
			return
		}
		v, err := DecodeJSON([]byte(doc))
		res, ok := v.(map[string]any)
		if err != nil || !ok {
			return
		}
		rec, err := fp.Flatten(res)
		if err != nil {
			return
		}
		got, present := rec["x"]
		if n, isNum := got.(json.Number); isNum && !bytes.Contains([]byte(doc), []byte(n.String())) {
			t.Fatalf("number %q is not text of the record %q", n, doc)
		}
		if !strings.ContainsAny(path, ".[") {
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
		if len(rec) > 1 {
			t.Fatalf("one path made %d fields", len(rec))
		}
	})
}

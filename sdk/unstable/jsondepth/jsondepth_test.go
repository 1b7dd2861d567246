package jsondepth

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func deep(n int) string { return strings.Repeat(`[{"k":`, n) + "1" + strings.Repeat("}]", n) }

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		doc, path string
		limit     int
		want      string // the path refused; "" accepted
	}{
		{`{"a": [1, 2, {"b": [[]]}]}`, "", 5, ""},
		{`{"a": [1, 2, {"b": [[]]}]}`, "", 4, "a[2].b[0]"},
		{`{"a": [1, 2, {"b": [[]]}]}`, "", 3, "a[2].b"},
		{`{"a": [1, 2, {"b": [[]]}]}`, "req", 3, "req.a[2].b"},
		{`{"x": 1, "a\"]{": {"c": [0, [0, [ ]]]}}`, "", 3, `a\"]{.c[1]`},
		{`[[1], [2], [[3]]]`, "r", 2, "r[2][0]"},
		{`"[[[[[[["`, "", 1, ""},
		{`[[[`, "", 2, "[0][0]"},
		{`]]]{{`, "", 5, ""}, // malformed: the parser's concern
		{deep(1_000_000), "", 64, "[0].k[0].k" + strings.Repeat("[0].k", 30)},
	} {
		err := CheckJSON(tc.doc, tc.path, tc.limit)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%.40q limit %d: %v", tc.doc, tc.limit, err)
			}
			continue
		}
		ne, ok := errors.AsType[*Error](err)
		if !ok || ne.Path != tc.want || ne.Limit != tc.limit {
			t.Errorf("%.40q limit %d: %v, want the path %q", tc.doc, tc.limit, err, tc.want)
		}
	}
}

// depthOf is the nesting of a decoded value, the reference CheckJSON is
// held to.
func depthOf(v any) int {
	d := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range t {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// FuzzCheckJSON holds CheckJSON to encoding/json: on every document
// encoding/json accepts, CheckJSON refuses exactly those deeper than the
// limit.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[1,[2,[3]]]`, `{"a":{"b":{"c":[]}}}`, `"[{"`, `{"\"[":[{}]}`, deep(3), deep(40)} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, doc string, limit int) {
		limit = 1 + (limit&0xff)%100
		err := CheckJSON(doc, "p", limit)
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		if got := depthOf(v); (got > limit) != (err != nil) {
			t.Fatalf("depth %d, limit %d: CheckJSON says %v", got, limit, err)
		}
		if e, ok := errors.AsType[*Error](err); ok && !strings.HasPrefix(e.Path, "p") {
			t.Fatalf("path %q without the prefix", e.Path)
		}
	})
}

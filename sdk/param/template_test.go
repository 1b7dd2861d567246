package param

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

var strconvQuote = strconv.Quote

func urlParse(s string) (*url.URL, error) { return url.Parse("https://h.example" + s) }

// TestTemplateParse: {template: ...} is a deployment value only (Templates,
// ParseMap); one that names no parameter or has a stray brace is refused
// at its path.
func TestTemplateParse(t *testing.T) {
	t.Parallel()
	v, err := Parse(map[string]any{"template": "Patient/{patient_ref}"}, "search_param_exprs.subject", Templates())
	if err != nil || v.Template != "Patient/{patient_ref}" || !v.IsTemplate() || v.IsParam() {
		t.Fatalf("Parse = %+v, %v", v, err)
	}
	if got := (Value{Template: "{a}-{b}-{a}"}).Params(); strings.Join(got, ",") != "a,b" {
		t.Errorf("Params = %v, want a,b", got)
	}
	for name, tc := range map[string]struct {
		tree any
		opts []Option
		want string // path, then a phrase of the message
	}{
		"contract":     {map[string]any{"template": "Patient/{id}"}, nil, "k.template|not allowed here"},
		"no parameter": {map[string]any{"template": "Patient/123"}, []Option{Templates()}, "k.template|names no run parameter"},
		"open brace":   {map[string]any{"template": "Patient/{id"}, []Option{Templates()}, "k.template|brace"},
		"stray close":  {map[string]any{"template": "urn:x|{claim}}"}, []Option{Templates()}, "k.template|brace"},
		"empty name":   {map[string]any{"template": "a{}{id}"}, []Option{Templates()}, "k.template|brace"},
		"not text":     {map[string]any{"template": json.Number("5")}, []Option{Templates()}, "k.template|must be text"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.tree, "k", tc.opts...)
			path, phrase, _ := strings.Cut(tc.want, "|")
			var pe *refusal.Error
			if !errors.As(err, &pe) || pe.Path != path || !strings.Contains(pe.Message, phrase) {
				t.Fatalf("err %v, want one at %s saying %q", err, path, phrase)
			}
		})
	}
	// A deployment map takes templates and keeps their own refusal.
	vs, err := ParseMap(map[string]json.RawMessage{"subject": json.RawMessage(`{"template": "Patient/{id}"}`), "code": json.RawMessage(`"x"`)}, "search_param_exprs")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := vs.Get("subject"); got.Template != "Patient/{id}" {
		t.Errorf("ParseMap subject = %+v", got)
	}
	_, err = ParseMap(map[string]json.RawMessage{"subject": json.RawMessage(`{"template": "Patient/id"}`)}, "search_param_exprs")
	if err == nil || !strings.HasPrefix(err.Error(), "search_param_exprs.subject.template: ") || !strings.Contains(err.Error(), "names no run parameter") {
		t.Errorf("ParseMap of a template naming nothing: %v", err)
	}
}

// TestTemplateBind: each parameter of a template is escaped for the place
// the value goes, the literal text kept as written.
func TestTemplateBind(t *testing.T) {
	t.Parallel()
	params := map[string]string{"patient_ref": "p 1&x=2", "claim": "C-1", "bad": "a\x00"}
	tmpl := Value{Template: "Patient/{patient_ref}"}
	for name, tc := range map[string]struct {
		v      Value
		escape func(string) (string, error)
		want   string // or the error's phrase after "!"
	}{
		"data":          {tmpl, Data, "Patient/p 1&x=2"},
		"query":         {tmpl, QueryValue, "Patient/p+1%26x%3D2"},
		"path":          {Value{Template: "v-{claim}"}, PathSegment, "v-C-1"},
		"path refuses":  {Value{Template: "x/{slash}"}, PathSegment, "!run parameter \"slash\" holds a path separator"},
		"control":       {Value{Template: "urn:claims|{bad}"}, Data, "!run parameter \"bad\" holds a control character"},
		"missing":       {Value{Template: "urn:claims|{nope}"}, Data, "!the run has no parameter \"nope\""},
		"twice":         {Value{Template: "{claim}/{claim}"}, Data, "C-1/C-1"},
		"plain param":   {Value{Param: "claim"}, QueryValue, "C-1"},
		"plain literal": {Value{Literal: "a b"}, QueryValue, "a b"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := params
			if name == "path refuses" {
				ps = map[string]string{"slash": "a/b"}
			}
			got, err := tc.v.BindIn(ps, "k", tc.escape)
			if phrase, isErr := strings.CutPrefix(tc.want, "!"); isErr {
				var pe *refusal.Error
				if !errors.As(err, &pe) || pe.Path != "k" || !strings.Contains(pe.Message, phrase) {
					t.Fatalf("BindIn = %q, %v; want an error at k saying %q", got, err, phrase)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("BindIn = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// Bind is the data place.
	if got, err := tmpl.Bind(params, "k"); err != nil || got != "Patient/p 1&x=2" {
		t.Errorf("Bind = %q, %v", got, err)
	}
}

// TestExpandValuesSource: a template entry in a URL template is bound for the
// placeholder's place: its parameters escaped as a path segment or a query
// value, its literal text kept, so a literal '/' may span segments while a
// parameter's may not.
func TestExpandValuesSource(t *testing.T) {
	t.Parallel()
	vs, err := ParseMap(map[string]json.RawMessage{
		"subject": json.RawMessage(`{"template": "Patient/{patient_id}"}`),
		"ident":   json.RawMessage(`{"template": "urn:claims|{claim}"}`),
		"pid":     json.RawMessage(`{"param": "patient_id"}`),
	}, "path_params")
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"patient_id": "P 1", "claim": "C&1"}
	got, err := Expand("/fhir/{subject}/_history?identifier={ident}&p={pid}", URL, vs.Source(params))
	if want := "/fhir/Patient/P%201/_history?identifier=urn:claims|C%261&p=P+1"; err != nil || got != want {
		t.Fatalf("Expand(vs.Source) = %q, %v; want %q", got, err, want)
	}
	_, err = Expand("/fhir/{subject}", URL, vs.Source(map[string]string{"patient_id": "../admin"}))
	if err == nil || !strings.Contains(err.Error(), "placeholder {subject} in the path") || !strings.Contains(err.Error(), `run parameter "patient_id"`) {
		t.Errorf("a parameter leaving its segment: %v", err)
	}
	_, err = Expand("/fhir/{subject}", URL, vs.Source(map[string]string{}))
	var pe *refusal.Error
	if !errors.As(err, &pe) || pe.Path != "path_params.subject" {
		t.Errorf("a missing parameter: %v, want an error at path_params.subject", err)
	}
	// BindWith: an adapter's own rule applies to every parameter.
	noComma := func(s string) (string, error) {
		if strings.Contains(s, ",") {
			return "", errors.New("holds a comma")
		}
		return Data(s)
	}
	if _, err := vs.BindWith(map[string]string{"patient_id": "a,b", "claim": "c"}, noComma); err == nil || !strings.Contains(err.Error(), "holds a comma") {
		t.Errorf("BindWith let a comma through: %v", err)
	}
	bound, err := vs.BindWith(params, noComma)
	if err != nil || bound["subject"] != "Patient/P 1" || bound["ident"] != "urn:claims|C&1" || bound["pid"] != "P 1" {
		t.Errorf("BindWith = %v, %v", bound, err)
	}
}

// FuzzTemplateInURL: whatever a template's parameter holds, the URL it
// expands to is refused or keeps the template's path segments and query
// keys, the parameter reading back as itself inside the template's text.
func FuzzTemplateInURL(f *testing.F) {
	tmpls := []string{"Patient/{v}", "urn:claims|{v}", "{v}-{v}", "x {v} y"}
	for _, s := range []string{"p1", "../admin", "a&b=c", "a/b", "..", "", "%2F", "#f", "a\x00", "ç /?"} {
		for i := range tmpls {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, v string) {
		tmpl := tmpls[int(which)%len(tmpls)]
		vs, err := ParseMap(map[string]json.RawMessage{"k": json.RawMessage(`{"template": ` + strconvQuote(tmpl) + `}`)}, "path_params")
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"/fhir/Observation?subject={k}&_count=10", "/fhir/{k}/_history"} {
			got, err := Expand(target, URL, vs.Source(map[string]string{"v": v}))
			if err != nil {
				continue
			}
			ref, err := Expand(target, URL, vs.Source(map[string]string{"v": "PLACEHOLDER"}))
			if err != nil {
				t.Fatal(err)
			}
			u, uerr := urlParse(got)
			r, _ := urlParse(ref)
			if uerr != nil {
				t.Fatalf("%q expanded to %q, not a URL: %v", v, got, uerr)
			}
			if strings.Contains(target, "?") {
				if len(u.Query()) != len(r.Query()) || u.Query().Get("_count") != "10" {
					t.Fatalf("%q changed the query: %q", v, got)
				}
				if want := strings.ReplaceAll(r.Query().Get("subject"), "PLACEHOLDER", v); u.Query().Get("subject") != want {
					t.Fatalf("%q: subject reads back as %q, want %q", v, u.Query().Get("subject"), want)
				}
				continue
			}
			if strings.Count(u.EscapedPath(), "/") != strings.Count(r.EscapedPath(), "/") {
				t.Fatalf("%q changed the path's segments: %q (template gives %q)", v, got, ref)
			}
		}
	})
}

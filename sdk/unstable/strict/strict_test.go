package strict_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

type auth struct {
	TokenEnv string `json:"token_env" strict:"required"`
}

type shared struct {
	BaseURL string `json:"base_url"`
}

type target struct {
	Name    string            `json:"name" strict:"required"`
	Limit   int               `json:"limit"`
	Small   int8              `json:"small"`
	Count   uint              `json:"count"`
	Ratio   float64           `json:"ratio"`
	On      bool              `json:"on"`
	Auth    *auth             `json:"auth"`
	Fields  map[string]auth   `json:"fields"`
	Tags    []string          `json:"tags"`
	Box     [2]int            `json:"box"`
	Amount  json.Number       `json:"amount"`
	Extra   json.RawMessage   `json:"extra"`
	Tree    any               `json:"tree"`
	Names   map[string]string `json:"names"`
	Skipped string            `json:"-"`
	shared
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		tree     string
		code     string
		path     string
		contains []string
	}{
		"unknown key":         {`{"name":"a","limt":1}`, strict.CodeUnknownKey, "cfg.limt", []string{`"limt" is not one of the keys of cfg: name, limit,`, `did you mean "limit"?`}},
		"unknown, first":      {`{"name":"a","zz":1,"aa":2}`, strict.CodeUnknownKey, "cfg.aa", []string{`"aa"`}},
		"unknown before type": {`{"name":5,"zz":1}`, strict.CodeUnknownKey, "cfg.zz", nil},
		"no suggestion":       {`{"name":"a","colour":1}`, strict.CodeUnknownKey, "cfg.colour", []string{"base_url"}},
		"nested unknown":      {`{"name":"a","auth":{"token":"T"}}`, strict.CodeUnknownKey, "cfg.auth.token", []string{"keys of cfg.auth: token_env"}},
		"map of structs":      {`{"name":"a","fields":{"f":{"token_env":"T","x":1}}}`, strict.CodeUnknownKey, "cfg.fields.f.x", nil},
		"missing":             {`{"limit":1}`, strict.CodeMissing, "cfg.name", []string{"missing"}},
		"required null":       {`{"name":null}`, strict.CodeMissing, "cfg.name", []string{"missing"}},
		"nested missing":      {`{"name":"a","auth":{}}`, strict.CodeMissing, "cfg.auth.token_env", nil},
		"string":              {`{"name":5}`, strict.CodeType, "cfg.name", []string{"must be a string, got 5"}},
		"null string":         {`{"name":"a","base_url":null}`, strict.CodeType, "cfg.base_url", []string{"must be a string, got null"}},
		"bool":                {`{"name":"a","on":"yes"}`, strict.CodeType, "cfg.on", []string{"true or false, got a string"}},
		"whole":               {`{"name":"a","limit":1.5}`, strict.CodeType, "cfg.limit", []string{"whole number"}},
		"overflow":            {`{"name":"a","small":300}`, strict.CodeType, "cfg.small", []string{"whole number"}},
		"negative uint":       {`{"name":"a","count":-1}`, strict.CodeType, "cfg.count", []string{"0 or more"}},
		"float":               {`{"name":"a","ratio":"x"}`, strict.CodeType, "cfg.ratio", []string{"a number"}},
		"number":              {`{"name":"a","amount":true}`, strict.CodeType, "cfg.amount", []string{"a number"}},
		"number text":         {`{"name":"a","amount":"abc"}`, strict.CodeType, "cfg.amount", []string{"a number"}},
		"map":                 {`{"name":"a","auth":"x"}`, strict.CodeType, "cfg.auth", []string{"must be a map, got a string"}},
		"list":                {`{"name":"a","tags":{}}`, strict.CodeType, "cfg.tags", []string{"must be a list, got a map"}},
		"list item":           {`{"name":"a","tags":["x",1]}`, strict.CodeType, "cfg.tags[1]", []string{"string"}},
		"array length":        {`{"name":"a","box":[1]}`, strict.CodeType, "cfg.box", []string{"2 items"}},
		"map entry":           {`{"name":"a","names":{"k":[]}}`, strict.CodeType, "cfg.names.k", []string{"string"}},
		"top not a map":       {`[1]`, strict.CodeType, "cfg", []string{"must be a map, got a list"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var v target
			err := strict.DecodeJSON([]byte(tt.tree), "cfg", &v)
			se, ok := errors.AsType[*strict.Error](err)
			if !ok {
				t.Fatalf("DecodeJSON = %v; want a *strict.Error", err)
			}
			if se.Code != tt.code || se.Path != tt.path {
				t.Errorf("code %s at %q, want %s at %q (%v)", se.Code, se.Path, tt.code, tt.path, err)
			}
			for _, w := range tt.contains {
				if !strings.Contains(se.Message, w) {
					t.Errorf("message %q does not say %q", se.Message, w)
				}
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	v := target{Limit: 7, Ratio: 0.5} // defaults an absent key keeps
	err := strict.DecodeJSON([]byte(`{"name":"n","small":-3,"count":2.0,"on":true,"auth":{"token_env":"T"},
		"fields":{"a":{"token_env":"A"}},"tags":["x"],"box":[1,2],"amount":"1.50","extra":{"k":[1]},
		"tree":{"deep":[1,"a"]},"names":null,"base_url":"https://h"}`), "", &v)
	if err != nil {
		t.Fatal(err)
	}
	want := target{
		Name: "n", Limit: 7, Small: -3, Count: 2, Ratio: 0.5, On: true, Auth: &auth{TokenEnv: "T"},
		Fields: map[string]auth{"a": {TokenEnv: "A"}}, Tags: []string{"x"}, Box: [2]int{1, 2},
		Amount: "1.50", Extra: json.RawMessage(`{"k":[1]}`),
		Tree:   map[string]any{"deep": []any{json.Number("1"), "a"}},
		shared: shared{BaseURL: "https://h"},
	}
	if diff := cmp.Diff(want, v, cmp.AllowUnexported(target{})); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

// A YAML reader's tree: int and float64 numbers, map[any]any maps.
func TestDecodeYAMLTree(t *testing.T) {
	t.Parallel()
	tree := map[string]any{"name": "n", "limit": 3, "ratio": 1.25, "count": uint64(4), "amount": 2.5,
		"auth": map[any]any{"token_env": "T"}}
	var v target
	if err := strict.Decode(tree, "", &v); err != nil {
		t.Fatal(err)
	}
	if v.Limit != 3 || v.Ratio != 1.25 || v.Count != 4 || v.Amount != "2.5" || v.Auth == nil || v.Auth.TokenEnv != "T" {
		t.Errorf("decoded %+v", v)
	}
	err := strict.Decode(map[string]any{"name": "n", "auth": map[any]any{1: "x"}}, "", &v)
	if se, ok := errors.AsType[*strict.Error](err); !ok || se.Path != "auth" || se.Code != strict.CodeType {
		t.Errorf("a map with a number key: %v", err)
	}
}

type selfRead struct{ got string }

func (s *selfRead) UnmarshalTree(tree any, path string) error {
	str, ok := tree.(string)
	if !ok {
		return &strict.Error{Code: strict.CodeType, Path: path + ".inner", Message: "mine"}
	}
	s.got = str
	return nil
}

type jsonRead struct{ n int }

func (j *jsonRead) UnmarshalJSON(b []byte) error {
	if string(b) != `"ok"` {
		return errors.New("say ok")
	}
	j.n = 1
	return nil
}

func TestDecodeOwnDecoders(t *testing.T) {
	t.Parallel()
	var v struct {
		S selfRead  `json:"s"`
		J *jsonRead `json:"j"`
	}
	if err := strict.Decode(map[string]any{"s": "x", "j": "ok"}, "", &v); err != nil || v.S.got != "x" || v.J == nil || v.J.n != 1 {
		t.Fatalf("%+v, %v", v, err)
	}
	err := strict.Decode(map[string]any{"s": 1}, "top", &v)
	if se, ok := errors.AsType[*strict.Error](err); !ok || se.Path != "top.s.inner" {
		t.Errorf("UnmarshalTree's own refusal: %v", err)
	}
	err = strict.Decode(map[string]any{"j": "no"}, "top", &v)
	if se, ok := errors.AsType[*strict.Error](err); !ok || se.Path != "top.j" || se.Code != strict.CodeInvalid || se.Message != "say ok" {
		t.Errorf("UnmarshalJSON's refusal, with the path: %v", err)
	}
}

// ownRefusal refuses everything but "ok" with a *refusal.Error of its own.
type ownRefusal struct{}

func (*ownRefusal) UnmarshalTree(tree any, path string) error {
	if tree != "ok" {
		return refusal.New("MINE", path, "say ok")
	}
	return nil
}

func TestDecodeRefusal(t *testing.T) {
	t.Parallel()
	var v struct {
		Own   ownRefusal `json:"own"`
		Self  selfRead   `json:"self"`
		Limit int        `json:"limit"`
	}
	if err := strict.DecodeRefusal(map[string]any{"own": "ok", "limit": json.Number("3")}, "top", &v, "BAD"); err != nil || v.Limit != 3 {
		t.Fatalf("a good tree: %+v, %v", v, err)
	}
	for _, tc := range []struct {
		name string
		tree any
		v    any
		want refusal.Error
	}{
		{"the decoder's own", map[string]any{"limt": 1}, &v, refusal.Error{Code: "BAD", Path: "top.limt", Message: `unknown key; "limt" is not one of the keys of top: own, self, limit (did you mean "limit"?)`}},
		{"a wrong type", map[string]any{"limit": "x"}, &v, refusal.Error{Code: "BAD", Path: "top.limit", Message: "must be a whole number, got a string"}},
		{"a type's own *refusal.Error, as it is", map[string]any{"own": "no"}, &v, refusal.Error{Code: "MINE", Path: "top.own", Message: "say ok"}},
		{"a type's own *strict.Error", map[string]any{"self": 1}, &v, refusal.Error{Code: "BAD", Path: "top.self.inner", Message: "mine"}},
		{"not a pointer", map[string]any{}, v, refusal.Error{Code: "BAD", Path: "top", Message: fmt.Sprintf("strict.Decode needs a non-nil pointer, not %T", v)}},
	} {
		err := strict.DecodeRefusal(tc.tree, "top", tc.v, "BAD")
		r, ok := errors.AsType[*refusal.Error](err)
		if !ok {
			t.Errorf("%s: %T %v; want a *refusal.Error", tc.name, err, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *r); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

type Embedded struct {
	Region string `json:"region"`
}

func TestDecodeEmbeddedPointer(t *testing.T) {
	t.Parallel()
	var v struct {
		*Embedded
		Name string `json:"name"`
	}
	if err := strict.Decode(map[string]any{"name": "n"}, "", &v); err != nil || v.Embedded != nil {
		t.Fatalf("no key of the embedded struct: %+v, %v", v, err)
	}
	if err := strict.Decode(map[string]any{"region": "eu"}, "", &v); err != nil || v.Embedded == nil || v.Region != "eu" {
		t.Fatalf("a key of the embedded struct: %+v, %v", v, err)
	}
	if got := strict.Keys(reflect.TypeOf(v)); !slices.Equal(got, []string{"region", "name"}) {
		t.Errorf("keys %v", got)
	}
}

func TestDecodeDepth(t *testing.T) {
	t.Parallel()
	type node struct {
		Next *node `json:"next"`
	}
	var tree any = map[string]any{}
	for range jsondepth.Max + 5 {
		tree = map[string]any{"next": tree}
	}
	var n node
	err := strict.Decode(tree, "", &n)
	if se, ok := errors.AsType[*strict.Error](err); !ok || se.Code != strict.CodeDepth {
		t.Fatalf("a tree deeper than the bound: %v", err)
	}
	deep := strings.Repeat(`{"next":`, jsondepth.Max+1) + "{}" + strings.Repeat("}", jsondepth.Max+1)
	err = strict.DecodeJSON([]byte(deep), "doc", &n)
	if se, ok := errors.AsType[*strict.Error](err); !ok || se.Code != strict.CodeDepth || !strings.HasPrefix(se.Path, "doc.next") {
		t.Fatalf("JSON deeper than the bound: %v", err)
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{"syntax": `{"a":`, "two values": `{} {}`} {
		if _, err := strict.ParseJSON([]byte(text), "p"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if tree, err := strict.ParseJSON([]byte("  "), "p"); tree != nil || err != nil {
		t.Errorf("empty text: %v, %v", tree, err)
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	known := []string{"match", "expected_count", "kind"}
	for key, want := range map[string]string{"matches": "match", "expected_cnt": "expected_count", "knd": "kind", "zzzz": "", "k": ""} {
		if got := strict.Closest(key, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", key, got, want)
		}
	}
}

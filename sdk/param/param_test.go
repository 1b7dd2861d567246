package param

import (
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		tree     any
		want     Value
		wantPath string
		wantMsg  string
	}{
		"bare string":        {tree: "x", want: Value{Literal: "x"}},
		"empty string":       {tree: "", want: Value{}},
		"literal object":     {tree: map[string]any{"literal": "{param: x}"}, want: Value{Literal: "{param: x}"}},
		"param object":       {tree: map[string]any{"param": "patient_id"}, want: Value{Param: "patient_id"}},
		"number":             {tree: json.Number("42"), wantPath: "m.id", wantMsg: `a value must be a string, got a number; write "42" (id)`},
		"boolean":            {tree: true, wantPath: "m.id", wantMsg: `write "true"`},
		"null":               {tree: nil, wantPath: "m.id", wantMsg: "got null"},
		"list":               {tree: []any{"a"}, wantPath: "m.id", wantMsg: "got a list"},
		"two keys":           {tree: map[string]any{"literal": "a", "param": "b"}, wantPath: "m.id", wantMsg: "exactly one key"},
		"empty object":       {tree: map[string]any{}, wantPath: "m.id", wantMsg: "exactly one key"},
		"unknown key":        {tree: map[string]any{"foo": "a"}, wantPath: "m.id", wantMsg: `malformed value object with key "foo"`},
		"empty param":        {tree: map[string]any{"param": ""}, wantPath: "m.id.param", wantMsg: `got ""`},
		"number param":       {tree: map[string]any{"param": json.Number("1")}, wantPath: "m.id.param", wantMsg: "got 1"},
		"number literal":     {tree: map[string]any{"literal": json.Number("1.50")}, wantPath: "m.id.literal", wantMsg: `a literal must be a string, got a number; write "1.50"`},
		"go int from a tree": {tree: 7, wantPath: "m.id", wantMsg: `got a number; write "7"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.tree, "m.id")
			if tt.wantMsg == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Parse = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var perr *refusal.Error
			if !errors.As(err, &perr) || perr.Path != tt.wantPath || !strings.Contains(perr.Message, tt.wantMsg) {
				t.Fatalf("Parse error %v; want at %s a message with %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestParseNumberText(t *testing.T) {
	t.Parallel()
	_, err := Parse(json.Number("2.50"), "v", NumberText(func(string) string { return "2.5" }))
	if err == nil || !strings.Contains(err.Error(), `write "2.5"`) {
		t.Fatalf("Parse = %v; want the rendered number", err)
	}
}

func TestParseJSONAndBind(t *testing.T) {
	t.Parallel()
	params := map[string]string{"patient_id": "p1", "empty": ""}
	tests := map[string]struct {
		raw     string
		want    string
		wantMsg string
	}{
		"string":          {raw: `"x"`, want: "x"},
		"literal":         {raw: `{"literal": "y"}`, want: "y"},
		"param":           {raw: `{"param": "patient_id"}`, want: "p1"},
		"empty param":     {raw: `{"param": "empty"}`, want: ""},
		"missing param":   {raw: `{"param": "other"}`, wantMsg: `the run has no parameter "other"; pass it with the run (--param other=VALUE) or write a literal`},
		"number":          {raw: `5`, wantMsg: `write a string, {literal: "text"} or {param: name}; numbers are written as strings ("42")`},
		"null":            {raw: `null`, wantMsg: "write a string"},
		"two values":      {raw: `"a" "b"`, wantMsg: "write a string"},
		"literal number":  {raw: `{"literal": 1}`, wantMsg: "write a string"},
		"not JSON":        {raw: `{`, wantMsg: "write a string"},
		"param and extra": {raw: `{"param": "patient_id", "x": 1}`, wantMsg: "write a string"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := BindJSON(json.RawMessage(tt.raw), "section.key", params)
			if tt.wantMsg == "" {
				if err != nil || got != tt.want {
					t.Fatalf("BindJSON = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			var perr *refusal.Error
			if !errors.As(err, &perr) || perr.Path != "section.key" || !strings.Contains(perr.Message, tt.wantMsg) {
				t.Fatalf("BindJSON error %v; want at section.key a message with %q", err, tt.wantMsg)
			}
		})
	}
}

func TestBindMap(t *testing.T) {
	t.Parallel()
	got, err := BindMap(map[string]json.RawMessage{"a": json.RawMessage(`"x"`), "b": json.RawMessage(`{"param":"p"}`)}, "vars", map[string]string{"p": "v"})
	if err != nil || len(got) != 2 || got["a"] != "x" || got["b"] != "v" {
		t.Fatalf("BindMap = %v, %v", got, err)
	}
	_, err = BindMap(map[string]json.RawMessage{"b": json.RawMessage(`{"param":"q"}`), "a": json.RawMessage(`1`)}, "vars", nil)
	var perr *refusal.Error
	if !errors.As(err, &perr) || perr.Path != "vars.a" {
		t.Fatalf("BindMap error %v; want the first entry in name order refused", err)
	}
}

func TestPlaces(t *testing.T) {
	t.Parallel()
	type place func(string) (string, error)
	tests := map[string]struct {
		place   place
		v       string
		want    string
		wantErr string
	}{
		"segment plain":          {place: PathSegment, v: "PAT-1", want: "PAT-1"},
		"segment escaped":        {place: PathSegment, v: "a b?&ç", want: "a%20b%3F&%C3%A7"},
		"segment dot-dot":        {place: PathSegment, v: "..", wantErr: "names another resource"},
		"segment dot":            {place: PathSegment, v: ".", wantErr: "names another resource"},
		"segment empty":          {place: PathSegment, v: "", wantErr: "names another resource"},
		"segment slash":          {place: PathSegment, v: "../admin", wantErr: "path separator"},
		"segment deep traversal": {place: PathSegment, v: "p1/../../x", wantErr: "path separator"},
		"segment backslash":      {place: PathSegment, v: `..\x`, wantErr: "path separator"},
		"segment NUL":            {place: PathSegment, v: "p1\x00", wantErr: "control character"},
		"segment newline":        {place: PathSegment, v: "p1\nx", wantErr: "control character"},
		"segment C1 control":     {place: PathSegment, v: "p1\u0085", wantErr: "control character"},
		"segment bad UTF-8":      {place: PathSegment, v: "p1\xff", wantErr: "UTF-8"},
		"segment inner dots":     {place: PathSegment, v: "a..b", want: "a..b"},
		"query ampersand":        {place: QueryValue, v: "p1&limit=999", want: "p1%26limit%3D999"},
		"query slash kept":       {place: QueryValue, v: "Patient/1", want: "Patient%2F1"},
		"query empty":            {place: QueryValue, v: "", want: ""},
		"query hash plus":        {place: QueryValue, v: "a#b+c", want: "a%23b%2Bc"},
		"query tab":              {place: QueryValue, v: "a\tb", wantErr: "control character"},
		"file plain":             {place: FileName, v: "note-1.txt", want: "note-1.txt"},
		"file star":              {place: FileName, v: "*", want: `\*`},
		"file glob class":        {place: FileName, v: "a[0-9]?", want: `a\[0-9\]\?`},
		"file dot-dot":           {place: FileName, v: "..", wantErr: "another directory"},
		"file traversal":         {place: FileName, v: "../x", wantErr: "path separator"},
		"file backslash":         {place: FileName, v: `a\*`, wantErr: "path separator"},
		"file empty":             {place: FileName, v: "", wantErr: "another directory"},
		"file NUL":               {place: FileName, v: "a\x00", wantErr: "control character"},
		"text DEL":               {place: func(v string) (string, error) { return v, Check(v) }, v: "a\x7f", wantErr: "control character"},
		"text plain":             {place: func(v string) (string, error) { return v, Check(v) }, v: "a b/c ..", want: "a b/c .."},
		"text replacement rune":  {place: func(v string) (string, error) { return v, Check(v) }, v: "a\uFFFD", want: "a\uFFFD"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.place(tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%q: got %q, %v; want a refusal with %q", tt.v, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%q: got %q, %v; want %q", tt.v, got, err, tt.want)
			}
		})
	}
}

func TestFileNameMatchesOnlyItself(t *testing.T) {
	t.Parallel()
	pat, err := FileName("*")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"*": true, "a": false, "": false, "**": false} {
		if got, _ := path.Match(pat, name); got != want {
			t.Errorf("path.Match(%q, %q) = %v, want %v", pat, name, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	values := map[string]string{"id": "a b", "q": "x&y=1", "dots": "..", "slash": "a/b", "star": "*", "type.name": "Obs"}
	lookup := func(n string) (string, bool) { v, ok := values[n]; return v, ok }
	tests := map[string]struct {
		template string
		syntax   Place
		want     string
		wantErr  string
	}{
		"path and query":          {template: "/api/{id}/x?f={q}&g={id}", syntax: URL, want: "/api/a%20b/x?f=x%26y%3D1&g=a+b"},
		"fragment is query-like":  {template: "https://h/p#{q}", syntax: URL, want: "https://h/p#x%26y%3D1"},
		"dotted name":             {template: "/{type.name}/1", syntax: URL, want: "/Obs/1"},
		"literal braces":          {template: `/x?filter={"a":"{id}"}&{}`, syntax: URL, want: `/x?filter={"a":"a+b"}&{}`},
		"dot-dot in the path":     {template: "/api/{dots}", syntax: URL, wantErr: `placeholder {dots} in the path would be ".."`},
		"slash in the path":       {template: "/api/{slash}", syntax: URL, wantErr: "placeholder {slash} in the path holds a path separator"},
		"slash in the query":      {template: "/api?x={slash}", syntax: URL, want: "/api?x=a%2Fb"},
		"missing value":           {template: "/api/{nope}", syntax: URL, wantErr: "placeholder {nope} has no value"},
		"placeholder in the host": {template: "https://{id}.example.org/p", syntax: URL, wantErr: "scheme or host"},
		"placeholder in scheme":   {template: "{id}://example.org/p", syntax: URL, wantErr: "scheme or host"},
		"file pattern":            {template: "/data/{id}/*.pdf", syntax: FilePattern, want: "/data/a b/*.pdf"},
		"file pattern star":       {template: "/data/{star}.pdf", syntax: FilePattern, want: `/data/\*.pdf`},
		"file pattern traversal":  {template: "/data/{slash}.pdf", syntax: FilePattern, wantErr: "in the file pattern holds a path separator"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Expand(tt.template, tt.syntax, Lookup(lookup))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Expand = %q, %v; want a refusal with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Expand = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	got := Names("/a/{x}/{y.z}/{x}?q={_1}&{1bad}&{}&{a b}")
	if strings.Join(got, ",") != "x,y.z,_1" {
		t.Errorf("Names = %q", got)
	}
}

// TestExpandNeedsASource: a zero Source fills nothing and is refused, and
// URL's Bind refuses a value (its place depends on where it stands).
func TestExpandNeedsASource(t *testing.T) {
	t.Parallel()
	if got, err := Expand("/api/{id}", URL, Source{}); err == nil {
		t.Errorf("Expand with a zero Source = %q, nil; want a refusal", got)
	}
	if got, err := Expand("/api/x", URL, Source{}); err == nil {
		t.Errorf("Expand of a template without placeholders with a zero Source = %q, nil; want a refusal", got)
	}
	if got, err := URL.Bind("a"); err == nil {
		t.Errorf("URL.Bind = %q, nil; want a refusal", got)
	}
	if got, err := FilePattern.Bind("a*"); err != nil || got != `a\*` {
		t.Errorf("FilePattern.Bind(a*) = %q, %v; want a\\*", got, err)
	}
}

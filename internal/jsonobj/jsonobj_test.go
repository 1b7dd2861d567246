package jsonobj

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	got, err := Split([]byte(` {"b": 1.50, "a": {"x": [1, 2]}, "c": "\u00e9"} `))
	want := []Member{{"b", []byte(`1.50`)}, {"a", []byte(`{"x": [1, 2]}`)}, {"c", []byte(`"\u00e9"`)}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members, in order and as written (-want +got):\n%s", diff)
	}
	if got, err := Split([]byte(`{}`)); err != nil || len(got) != 0 {
		t.Errorf("an empty object: %v, %v", got, err)
	}
	for name, raw := range map[string]string{
		"a list":              `[1]`,
		"a string":            `"x"`,
		"empty":               ``,
		"a repeated key":      `{"a": 1, "a": 2}`,
		"data after it":       `{"a": 1} {}`,
		"not closed":          `{"a": 1`,
		"a broken value":      `{"a": tru}`,
		"a key without value": `{"a"}`,
	} {
		if got, err := Split([]byte(raw)); err == nil {
			t.Errorf("%s: %v, want an error", name, got)
		}
	}
}

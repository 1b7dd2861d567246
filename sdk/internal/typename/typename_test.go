package typename

import (
	"encoding/json"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{"x", "a string"},
		{json.Number("1"), "a number"},
		{7, "a number"},
		{int64(7), "a number"},
		{uint64(7), "a number"},
		{1.5, "a number"},
		{true, "a boolean"},
		{map[string]any{"a": 1}, "a map"},
		{[]any{1}, "a list"},
		{int32(1), "int32"},
	} {
		if got := Of(c.v); got != c.want {
			t.Errorf("Of(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}

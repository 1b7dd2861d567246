package strict

import (
	"encoding/json"
	"math"
	"testing"
)

// TestNumberText: every number type a tree may hold reads as its decimal
// text; anything else is not a number.
func TestNumberText(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
		ok   bool
	}{
		{json.Number("-1.5e3"), "-1.5e3", true},
		{2.5, "2.5", true},
		{float32(0.25), "0.25", true},
		{-7, "-7", true},
		{int64(math.MinInt64), "-9223372036854775808", true},
		{int32(-12), "-12", true},
		{uint64(math.MaxUint64), "18446744073709551615", true},
		{uint(42), "42", true},
		{"7", "", false},
		{true, "", false},
		{nil, "", false},
	} {
		got, ok := numberText(tc.v)
		if got != tc.want || ok != tc.ok {
			t.Errorf("numberText(%#v) = %q, %v; want %q, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

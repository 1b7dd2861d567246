// Package apijson holds what the API's JSON shapes need on both of its
// ends, the gRPC service (internal/server) and the HTTP listener
// (internal/httpapi): whether a JSON number survives the double that a
// google.protobuf.Value carries it in.
package apijson

import (
	"strconv"
	"strings"
)

// DoubleExact reports whether the JSON number text reads back unchanged
// from the double nearest to it: its decimal value, trailing zeros aside,
// is that of the double's shortest rendering. 36, 1234.50 and 1e3 are;
// a 19-digit id (1234567890123456789) or 2^60 written out in full is not,
// since the double would be rendered, compared and bound as another
// number. Text that is not a finite JSON number is not.
func DoubleExact(text string) bool {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return false // a syntax error, or out of a double's range
	}
	want, ok := decimal(text)
	if !ok {
		return false
	}
	got, _ := decimal(strconv.FormatFloat(f, 'e', -1, 64))
	return want == got
}

// decimal is the number's value as sign, significant digits and the
// exponent of the first one: "-0.0120e2" is "-1.2e0" → "-12|0". Zero is
// "0" whatever its sign or exponent.
func decimal(text string) (string, bool) {
	neg := strings.HasPrefix(text, "-")
	text = strings.TrimPrefix(text, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(text), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil {
			return "", false
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	// The first digit's place, before leading zeros are dropped.
	point := len(whole)
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return "0", true
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "|" + strconv.Itoa(point+exp), true
}

package apijson

import "testing"

func TestDoubleExact(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"0": true, "-0": true, "0.000": true, "0e999999999": true,
		"36": true, "-36": true, "1234.50": true, "1234.5": true, "1e3": true, "1E+3": true, "0.1": true, "-0.5": true,
		"9007199254740992": true, "9007199254740993": false,
		"1234567890123456789": false, "1152921504606846976": false,
		"3.14159265358979323846": false, "1e400": false, "1e-400": false,
		"abc": false, "": false,
	} {
		if got := DoubleExact(text); got != want {
			t.Errorf("DoubleExact(%q) = %v, want %v", text, got, want)
		}
	}
}

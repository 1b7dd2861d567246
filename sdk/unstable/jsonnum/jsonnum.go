// Package jsonnum owns the JSON number grammar (RFC 8259, section 6):
//
//	-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
//
// The judge's decoder and its canonical number text, and the SDK's record
// encoder and decoder, all read numbers with this one implementation, so
// they cannot disagree about what a number is. An adapter may use Valid to
// check text before returning it as a json.Number: the SDK refuses to send
// a json.Number that is not a JSON number.
//
// The package imports only the standard library, so the judge and a
// customer's adapter can use it as well as the SDK.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package jsonnum

import "errors"

// The ways text fails the grammar, each naming the part that is wrong.
var (
	// ErrNotNumber: no '-' or digit where the number starts, or no digit
	// after the '-'.
	ErrNotNumber = errors.New("invalid number")
	// ErrFraction: a '.' with no digit after it.
	ErrFraction = errors.New("invalid number: a '.' needs digits after it")
	// ErrExponent: an 'e' or 'E' (and sign) with no digit after it.
	ErrExponent = errors.New("invalid number: an exponent needs digits")
)

// Number is where one JSON number and its parts stand in the text it was
// read from: text[Start:End] is the number, text[Start:Frac] its sign and
// integer digits, text[Frac:Exp] its fraction with the '.' (empty when it has
// none) and text[Exp:End] its exponent with the 'e' or 'E' and the
// exponent's sign (empty when it has none).
type Number struct {
	Start, Frac, Exp, End int
}

// Integer reports whether the number has neither a fraction nor an
// exponent.
func (n Number) Integer() bool { return n.Frac == n.End }

// Scan reads the JSON number that starts at s[i]. It stops at the first byte
// that cannot continue the number, so s[End:] is whatever follows it (a JSON
// reader refuses "01" when it finds the "1" where a ',' should be). On an
// error the Number is incomplete and the error is one of ErrNotNumber,
// ErrFraction or ErrExponent.
func Scan(s string, i int) (Number, error) {
	n := Number{Start: i}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return n, ErrNotNumber
	}
	n.Frac = i
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return n, ErrFraction
		}
		i = j
	}
	n.Exp = i
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return n, ErrExponent
		}
		i = j
	}
	n.End = i
	return n, nil
}

// Valid reports whether s is one JSON number and nothing else.
func Valid(s string) bool {
	n, err := Scan(s, 0)
	return err == nil && n.End == len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

package compact

import (
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// Record is one flat record read from a system of record: a JSON object.
// Values are string, json.Number (exact number text), float64, the Go integer
// types, bool, nil, map[string]any or []any. Keys are literal: "patient.id" is
// a key, not a path.
type Record = map[string]any

// Canon returns the canonical text of a record value (docs/contracts.md §2) and whether
// the value has one. A nil value (JSON null, or a missing field) has none: it
// matches no selector value and never confirms a read-back.
func Canon(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return CanonNumber(string(x)), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case nil:
		return "", false
	case float64:
		return canonFloat(x)
	case float32:
		return canonFloat(float64(x))
	case int:
		return strconv.FormatInt(int64(x), 10), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case map[string]any, []any:
		var b strings.Builder
		writeCanonJSON(&b, x)
		return b.String(), true
	default:
		// An unknown Go type cannot come from JSON; treat it as no value so
		// that it can never satisfy a selector.
		return "", false
	}
}

func canonFloat(f float64) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	return CanonNumber(strconv.FormatFloat(f, 'g', -1, 64)), true
}

// maxPlainDigits bounds the plain-decimal rendering of a number: past it a
// number is written as <digits>e<exponent> so that "1e999999999" cannot make
// the judge allocate a gigabyte.
const maxPlainDigits = 1000

// CanonNumber renders JSON number text as its shortest exact decimal: no
// exponent, no trailing fractional zeros, no fraction at all when integral,
// and "0" for every zero. Text that is not a JSON number (sdk/unstable/jsonnum's
// grammar: no '+', no leading zero, digits on both sides of a '.') is
// returned as is.
func CanonNumber(s string) string {
	if IsPlainInteger(s) {
		return s
	}
	n, err := jsonnum.Scan(s, 0)
	if err != nil || n.End != len(s) {
		return s
	}
	return canonScanned(s, n)
}

// canonScanned is CanonNumber of the number num that jsonnum.Scan read
// from s.
func canonScanned(s string, num jsonnum.Number) string {
	neg := s[num.Start] == '-'
	intDigits := s[num.Start:num.Frac]
	if neg {
		intDigits = intDigits[1:]
	}
	frac := ""
	if num.Frac < num.Exp {
		frac = s[num.Frac+1 : num.Exp] // after the '.'
	}
	digits := make([]byte, 0, len(intDigits)+len(frac))
	digits = append(append(digits, intDigits...), frac...)
	// The number is the digits times ten to the power exp (the digits read
	// as an integer).
	exp := -len(frac)
	var bigExp *big.Int // set when the exponent does not fit comfortably in an int
	if num.Exp < num.End {
		expText := s[num.Exp+1 : num.End] // after the 'e': an optional sign and digits
		eneg := expText[0] == '-'
		if expText[0] == '-' || expText[0] == '+' {
			expText = expText[1:]
		}
		digitsText := strings.TrimLeft(expText, "0")
		if len(digitsText) <= 15 {
			e, _ := strconv.Atoi("0" + digitsText)
			if eneg {
				e = -e
			}
			exp += e
		} else {
			bigExp, _ = new(big.Int).SetString(digitsText, 10)
			if eneg {
				bigExp.Neg(bigExp)
			}
			bigExp.Add(bigExp, big.NewInt(int64(exp)))
		}
	}
	// Strip leading and trailing zeros.
	expBeforeTrim := exp
	start := 0
	for start < len(digits) && digits[start] == '0' {
		start++
	}
	digits = digits[start:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if len(digits) == 0 {
		return "0"
	}
	// Written into a buffer on the stack and copied out once: one
	// allocation of the exact size.
	var buf [48]byte
	b := buf[:0]
	if neg {
		b = append(b, '-')
	}
	if bigExp != nil {
		// Far beyond any plain rendering: digits and the exact exponent.
		bigExp.Add(bigExp, big.NewInt(int64(exp)-int64(expBeforeTrim)))
		b = append(b, digits...)
		b = append(b, 'e')
		b = bigExp.Append(b, 10)
		return string(b)
	}
	n := len(digits)
	switch {
	case exp >= 0 && n+exp <= maxPlainDigits:
		b = append(b, digits...)
		for k := 0; k < exp; k++ {
			b = append(b, '0')
		}
	case exp < 0 && -exp < n:
		b = append(b, digits[:n+exp]...)
		b = append(b, '.')
		b = append(b, digits[n+exp:]...)
	case exp < 0 && -exp-n <= maxPlainDigits:
		b = append(b, "0."...)
		for k := 0; k < -exp-n; k++ {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits...)
		b = append(b, 'e')
		b = strconv.AppendInt(b, int64(exp), 10)
	}
	return string(b)
}

// PlainIntegerDigits bounds the integers IsPlainInteger accepts.
const PlainIntegerDigits = 30

// IsPlainInteger reports whether s is already canonical integer text: an
// optional minus and at most PlainIntegerDigits digits with no leading zero
// (and not "-0").
func IsPlainInteger(s string) bool {
	i := 0
	if len(s) > 0 && s[0] == '-' {
		i = 1
	}
	if i == len(s) || len(s)-i > PlainIntegerDigits {
		return false
	}
	if s[i] == '0' {
		return len(s) == 1
	}
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// writeCanonJSON writes v as canonical JSON: keys sorted at every level, no
// whitespace, numbers in canonical text, non-ASCII escaped as lowercase
// \uXXXX (surrogate pairs above the BMP), no HTML escaping. It is the
// encoding of both the contract hash and of object-valued record fields.
func writeCanonJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		WriteCanonString(b, x)
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case map[string]any:
		writeCanonObject(b, x, writeCanonJSON)
	case map[string]string:
		writeCanonObject(b, x, WriteCanonString)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonJSON(b, e)
		}
		b.WriteByte(']')
	default:
		if t, ok := Canon(v); ok {
			b.WriteString(t)
		} else {
			b.WriteString("null")
		}
	}
}

// writeCanonObject writes m as a JSON object, keys in byte order, each
// value by write.
func writeCanonObject[V any](b *strings.Builder, m map[string]V, write func(*strings.Builder, V)) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		WriteCanonString(b, k)
		b.WriteByte(':')
		write(b, m[k])
	}
	b.WriteByte('}')
}

const hexDigits = "0123456789abcdef"

func WriteCanonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b.WriteString(`\"`)
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\f':
				b.WriteString(`\f`)
			case c < 0x20 || c == 0x7f:
				writeU(b, rune(c))
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			writeU(b, hi)
			writeU(b, lo)
		} else {
			writeU(b, r)
		}
		i += size
	}
	b.WriteByte('"')
}

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[(r>>12)&0xf])
	b.WriteByte(hexDigits[(r>>8)&0xf])
	b.WriteByte(hexDigits[(r>>4)&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// CanonicalJSON returns v in the canonical JSON encoding (see writeCanonJSON).
func CanonicalJSON(v any) string {
	var b strings.Builder
	writeCanonJSON(&b, v)
	return b.String()
}

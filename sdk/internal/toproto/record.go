package toproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// Record encodes one record as a compact JSON object with sorted keys.
// json.Number values keep their exact text (and must be valid JSON numbers);
// NaN and infinities are refused, as JSON has no spelling for them.
//
// Captures can hold millions of records, so the common flat shapes (plain
// ASCII strings, json.Number, integers, booleans, null) are written
// directly; anything else goes through encoding/json.
func Record(r sdk.Record) ([]byte, error) {
	var e Encoder
	return e.Append(make([]byte, 0, 16+24*len(r)), r)
}

// Encoder appends records as Record encodes them. It keeps the sorted field
// names of the last record: the records of one read usually share their
// fields (every row of a query), and then each record costs one map lookup
// per field and no sort. The zero Encoder is ready to use; it is not safe
// for concurrent use.
type Encoder struct {
	keys []string
}

// Append appends the encoding of r to b. On an error b's contents past its
// original length are unspecified; the caller drops them.
func (e *Encoder) Append(b []byte, r sdk.Record) ([]byte, error) {
	if r == nil {
		return b, errors.New("record is nil; send an empty record as sdk.Record{}")
	}
	start := len(b)
	if len(r) > 0 && len(r) == len(e.keys) {
		// The same number of fields, each one of the last record's: the
		// same set of names (map keys are distinct), in the order known.
		out, same, err := e.appendKnown(b, r)
		if same || err != nil {
			return out, err
		}
		b = out[:start]
	}
	e.keys = e.keys[:0]
	for k := range r {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys)
	out, _, err := e.appendKnown(b, r)
	return out, err
}

// appendKnown writes r's fields in the order of e.keys; same is false when
// r lacks one of them (nothing useful was written then).
func (e *Encoder) appendKnown(b []byte, r sdk.Record) (out []byte, same bool, err error) {
	b = append(b, '{')
	for i, k := range e.keys {
		v, ok := r[k]
		if !ok {
			return b, false, nil
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		if b, err = appendValue(b, v); err != nil {
			return b, true, fmt.Errorf("record field %q cannot be encoded as JSON: %w", k, err)
		}
	}
	return append(b, '}'), true, nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case json.Number:
		if !jsonnum.Valid(string(x)) {
			return nil, fmt.Errorf("json.Number %q is not a JSON number", string(x))
		}
		return append(b, x...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	}
	// float64 (encoding/json's exact formatting), nested values, anything
	// with a MarshalJSON method.
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendString writes s as a JSON string. Plain printable ASCII is copied;
// anything needing an escape or UTF-8 handling goes through encoding/json.
func appendString(b []byte, s string) []byte {
	if !plainASCII(s) {
		enc, _ := json.Marshal(s) // a string always encodes
		return append(b, enc...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainASCII reports whether s can be written between quotes as it is:
// printable ASCII with no quote or backslash.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

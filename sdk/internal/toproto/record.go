package toproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/internal/jsontext"
)

// Record encodes one record as a compact JSON object with sorted keys.
// json.Number values keep their exact text (and must be valid JSON numbers);
// NaN and infinities are refused, as JSON has no spelling for them.
//
// Captures can hold millions of records, so the common flat shapes (plain
// ASCII strings, json.Number, integers, booleans, null) are written
// directly; anything else goes through encoding/json.
func Record(r sdk.Record) ([]byte, error) {
	if r == nil {
		return nil, errors.New("record is nil; send an empty record as sdk.Record{}")
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 16+24*len(r))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, r[k]); err != nil {
			return nil, fmt.Errorf("record field %q cannot be encoded as JSON: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case json.Number:
		if !jsontext.ValidNumber(string(x)) {
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
	if !jsontext.PlainASCII(s) {
		enc, _ := json.Marshal(s) // a string always encodes
		return append(b, enc...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// decodeJSONStd is the decoder DecodeJSON replaced, on encoding/json's
// tokens: the oracle FuzzDecodeJSON holds DecodeJSON to. DecodeJSON parses one JSON document into a tree of map[string]any, []any,
// string, json.Number, bool and nil. Unlike encoding/json it refuses a
// duplicate object key (the later one would silently win) and trailing data.
// A document nested more than MaxDepth levels is refused (a
// *jsondepth.Error naming the path) before anything recursive reads it.
func decodeJSONStd(data []byte) (any, error) {
	if err := jsondepth.CheckJSON(data, "", MaxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON document")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// FuzzDecodeJSON holds DecodeJSON to encoding/json (decodeJSONStd): the
// same documents accepted and the same trees, number texts included; at
// and past the nesting limit too.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `1`, `-0.5e10`, `"x"`, `true`, `null`, ` {"a": [1, {"b": null}], "c": "\u00e9\n"} `,
		`{"a": 1, "a": 2}`, `[1,]`, `{"a":1,}`, `[1 2]`, `{"a" 1}`, `{1: 2}`, `[01]`, `[1.]`, `"\ud800"`,
		"\"\xff\"", "[\"a\x01\"]", `truex`, `[true false]`, `{"a":{}} x`, `[[[[]]]]`, ``, ` `,
		strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
		strings.Repeat(`{"k":`, 40) + "1" + strings.Repeat("}", 40),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		got, err := DecodeJSON([]byte(doc))
		want, werr := decodeJSONStd([]byte(doc))
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: DecodeJSON %v, encoding/json %v", doc, err, werr)
		}
		if err != nil {
			return
		}
		// Compared by canonical text (which keeps each number's text) and
		// by value: cmp.Diff is exponential on deep trees that differ.
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: trees differ: encoding/json %s, DecodeJSON %s", doc, CanonicalJSON(want), CanonicalJSON(got))
		}
	})
}

// Package jsonobj splits a JSON object into its top-level members, in
// order, each value's bytes as written: for a reader that changes or
// reorders members and passes the rest on untouched (the HTTP gateway's
// run parameters, the FHIR test server's stored resources). A leaf:
// standard library only.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Member is one top-level member of a JSON object.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Split returns the members of raw, which must be exactly one JSON object
// with no key repeated, in their order. Only the top level is split
// (json.Decoder, one value at a time, its nesting bounded by
// encoding/json); each value is checked as JSON and kept as written.
func Split(raw []byte) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []Member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // in an object, json.Decoder yields only string keys here
		if seen[key] {
			return nil, fmt.Errorf("the key %q is repeated", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, Member{key, v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("the object is not closed")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more data after the object")
	}
	return out, nil
}

package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
)

// Section is one JSON object of an adapter's deployment section. Every
// accessor refuses a wrongly typed value with a *sdk.ConfigError naming the
// dotted path of the key.
type Section struct {
	kind string
	path string
	m    map[string]json.RawMessage
}

// Root reads the adapter's whole section and refuses keys outside known
// (kind is always allowed and must be kind when present).
func Root(raw json.RawMessage, kind string, known []string) (*Section, error) {
	s := &Section{kind: kind, m: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(raw)) != 0 {
		if err := json.Unmarshal(raw, &s.m); err != nil || s.m == nil {
			return nil, &sdk.ConfigError{Message: "the section must be a map of settings"}
		}
	}
	if v, ok := s.m["kind"]; ok {
		var k string
		if json.Unmarshal(v, &k) != nil || k != kind {
			return nil, &sdk.ConfigError{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %s", kind, string(v))}
		}
	}
	if err := sdk.RefuseUnknownKeys(kind, "", s.m, known); err != nil {
		return nil, err
	}
	return s, nil
}

// At is the dotted path of key inside this section.
func (s *Section) At(key string) string {
	if s.path == "" {
		return key
	}
	return s.path + "." + key
}

// Has reports whether key is present and not null.
func (s *Section) Has(key string) bool {
	v, ok := s.m[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// Sub returns the map under key, refusing keys outside known; nil when the
// key is absent or null.
func (s *Section) Sub(key string, known []string) (*Section, error) {
	if !s.Has(key) {
		return nil, nil
	}
	sub := &Section{kind: s.kind, path: s.At(key)}
	if err := json.Unmarshal(s.m[key], &sub.m); err != nil || sub.m == nil {
		return nil, &sdk.ConfigError{Path: sub.path, Message: "must be a map"}
	}
	if err := sdk.RefuseUnknownKeys(s.kind, sub.path, sub.m, known); err != nil {
		return nil, err
	}
	return sub, nil
}

// String returns the string under key, "" when absent.
func (s *Section) String(key string) (string, error) {
	if !s.Has(key) {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(s.m[key], &v); err != nil {
		return "", &sdk.ConfigError{Path: s.At(key), Message: "must be a string"}
	}
	return v, nil
}

// Bool returns the boolean under key, def when absent.
func (s *Section) Bool(key string, def bool) (bool, error) {
	if !s.Has(key) {
		return def, nil
	}
	var v bool
	if err := json.Unmarshal(s.m[key], &v); err != nil {
		return false, &sdk.ConfigError{Path: s.At(key), Message: "must be true or false"}
	}
	return v, nil
}

// Int returns the whole number under key, def when absent, refusing values
// outside [lo, hi].
func (s *Section) Int(key string, def, lo, hi int) (int, error) {
	if !s.Has(key) {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(s.m[key], &f); err != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, &sdk.ConfigError{Path: s.At(key), Message: fmt.Sprintf("must be a whole number from %d to %d", lo, hi)}
	}
	return int(f), nil
}

// StringMap returns the map of strings under key, nil when absent.
func (s *Section) StringMap(key string) (map[string]string, error) {
	if !s.Has(key) {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(s.m[key], &raw); err != nil || raw == nil {
		return nil, &sdk.ConfigError{Path: s.At(key), Message: "must be a map of names to strings"}
	}
	out := make(map[string]string, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		var v string
		if err := json.Unmarshal(raw[k], &v); err != nil {
			return nil, &sdk.ConfigError{Path: s.At(key) + "." + k, Message: `must be a string; write numbers as strings ("42")`}
		}
		out[k] = v
	}
	return out, nil
}

// Raw returns the undecoded value under key (nil when absent).
func (s *Section) Raw(key string) json.RawMessage {
	if !s.Has(key) {
		return nil
	}
	return s.m[key]
}

// Values reads the map of value expressions at key, to be bound per call
// (empty when the key is absent).
func (s *Section) Values(key string) (param.Values, error) {
	if !s.Has(key) {
		return param.Values{}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(s.m[key], &raw); err != nil || raw == nil {
		return param.Values{}, &sdk.ConfigError{Path: s.At(key), Message: "must be a map of names to values: a string, {literal: \"text\"} or {param: name}"}
	}
	vs, err := param.ParseMap(raw, s.At(key))
	return vs, ConfigError(err)
}

// ConfigError turns a *param.Error into the *sdk.ConfigError an adapter
// returns; other errors (and nil) pass through.
func ConfigError(err error) error {
	if perr, ok := errors.AsType[*param.Error](err); ok {
		return &sdk.ConfigError{Path: perr.Path, Message: perr.Message}
	}
	return err
}

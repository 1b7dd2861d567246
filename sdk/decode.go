package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/sdk/strict"
)

// decodeConfig decodes an adapter's section into v (a pointer) with the
// strict decoder (sdk/strict): exact numbers (json.Number where v holds
// any), unknown keys refused at any depth of v's structs with the key's
// path and the keys allowed there, and values of the wrong type refused
// with their path and what they must be. kind names the adapter in an
// unknown key's refusal ("" leaves it out). The key `kind` is always
// allowed at the top (the daemon may pass it along), and when kind is
// given it must name it.
func decodeConfig(kind string, raw json.RawMessage, v any) error {
	tree, err := strict.ParseJSON(raw, "")
	if err != nil {
		return configError(kind, err)
	}
	if tree == nil {
		return nil
	}
	if t := reflect.TypeOf(v); len(strict.Keys(t)) > 0 || isStruct(t) {
		top, ok := tree.(map[string]any)
		if !ok {
			return &ConfigError{Message: "the section must be a map of settings"}
		}
		if err := checkKind(kind, top["kind"]); err != nil {
			return err
		}
		if _, ok := top["kind"]; ok && !slices.Contains(strict.Keys(t), "kind") {
			top = maps.Clone(top)
			delete(top, "kind")
			tree = top
		}
	}
	if err := strict.Decode(tree, "", v); err != nil {
		return configError(kind, err)
	}
	return nil
}

func isStruct(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.Kind() == reflect.Struct
}

// configError is the strict decoder's refusal as a *ConfigError, the
// adapter's kind named in an unknown key's.
func configError(kind string, err error) error {
	se, ok := errors.AsType[*strict.Error](err)
	if !ok {
		return &ConfigError{Message: err.Error()}
	}
	msg := se.Message
	if se.Code == strict.CodeUnknownKey && kind != "" {
		msg = "unknown key for kind " + kind + strings.TrimPrefix(msg, "unknown key")
	}
	return &ConfigError{Path: se.Path, Message: msg}
}

// RefuseUnknownKeys refuses the first key of section, in sorted order, that
// is not in allowed, naming its path and the allowed keys. path is the
// section's own path ("" at the top, where `kind` is always allowed).
func RefuseUnknownKeys[V any](kind, path string, section map[string]V, allowed []string) error {
	for _, k := range slices.Sorted(maps.Keys(section)) {
		if (path == "" && k == "kind") || slices.Contains(allowed, k) {
			continue
		}
		if path == "" {
			allowed = slices.DeleteFunc(slices.Clone(allowed), func(k string) bool { return k == "kind" })
		}
		return configError(kind, strict.UnknownKey(path, k, allowed))
	}
	return nil
}

// checkKind refuses a section whose kind names another adapter than the
// one the daemon configures.
func checkKind(kind string, named any) error {
	if kind == "" || named == nil {
		return nil
	}
	s, ok := named.(string)
	switch {
	case !ok:
		return &ConfigError{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %s", kind, strict.Describe(named))}
	case s != kind:
		return &ConfigError{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %q", kind, s)}
	}
	return nil
}

// DecodeConfig decodes an adapter's section (raw JSON) into v, a pointer,
// with the strict decoder of sdk/strict and exact numbers. The top-level
// key `kind` is ignored. Keys are matched exactly (case counts). A key that
// v's structs have no field for is refused with a *ConfigError naming its
// dotted path, the keys allowed there and the nearest one, at any depth; a
// value of the wrong type with its path and what it must be ("must be true
// or false"); a field tagged strict:"required" that is absent or null as
// missing. The fields of an embedded struct (untagged) are keys of the
// struct that embeds it, so a group of keys several adapters share is
// declared once. ConfigureRequest's DecodeConfig method does the same and
// names the kind in the refusal.
func DecodeConfig(raw json.RawMessage, v any) error { return decodeConfig("", raw, v) }

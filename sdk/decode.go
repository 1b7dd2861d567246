package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decodeConfig unmarshals an adapter's section into v (a pointer), with
// exact numbers (json.Number where v holds any). Unknown keys are refused at
// any depth of v's structs, naming the key's path and the keys allowed
// there; kind names the adapter in that message ("" leaves it out). The key
// `kind` is always allowed at the top (the daemon may pass it along), and
// when kind is given it must name it.
func decodeConfig(kind string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Struct {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil || top == nil {
			return &ConfigError{Message: "the section must be a map of settings"}
		}
		if err := checkKind(kind, top["kind"]); err != nil {
			return err
		}
		if _, ok := top["kind"]; ok && !slices.Contains(jsonKeys(t), "kind") {
			delete(top, "kind")
			raw, _ = json.Marshal(top)
		}
		if err := refuseUnknown(kind, "", raw, t, true); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return &ConfigError{Message: err.Error()}
	}
	return nil
}

// RefuseUnknownKeys refuses the first key of section, in sorted order, that
// is not in allowed, naming its path and the allowed keys. path is the
// section's own path ("" at the top, where `kind` is always allowed).
func RefuseUnknownKeys[V any](kind, path string, section map[string]V, allowed []string) error {
	for _, k := range slices.Sorted(maps.Keys(section)) {
		if (path == "" && k == "kind") || slices.Contains(allowed, k) {
			continue
		}
		return &ConfigError{Path: join(path, k), Message: unknownKey(kind, path, k, allowed, path == "")}
	}
	return nil
}

// checkKind refuses a section whose kind names another adapter than the
// one the daemon configures.
func checkKind(kind string, raw json.RawMessage) error {
	if kind == "" || raw == nil {
		return nil
	}
	var named string
	if json.Unmarshal(raw, &named) != nil || named != kind {
		return &ConfigError{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %s", kind, raw)}
	}
	return nil
}

// refuseUnknown walks raw along t and refuses the first key, in sorted
// order, that t has no field for.
func refuseUnknown(kind, path string, raw json.RawMessage, t reflect.Type, top bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil // the type decodes (and refuses) its own keys, as Value does
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[json.RawMessage]() {
			return nil
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil //nolint:nilerr // the decoder reports the wrong type, with its own message
		}
		keys := jsonKeys(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			at := join(path, k)
			f, ok := field(t, k)
			if !ok {
				return &ConfigError{Path: at, Message: unknownKey(kind, path, k, keys, top)}
			}
			if err := refuseUnknown(kind, at, m[k], f.Type, false); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil //nolint:nilerr // as above
		}
		for i, item := range items {
			if err := refuseUnknown(kind, path+"["+strconv.Itoa(i)+"]", item, t.Elem(), false); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if t.Key().Kind() != reflect.String || json.Unmarshal(raw, &m) != nil {
			return nil //nolint:nilerr // as above
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := refuseUnknown(kind, join(path, k), m[k], t.Elem(), false); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownKey(kind, path, key string, keys []string, top bool) string {
	msg := "unknown key"
	if kind != "" {
		msg += " for kind " + kind
	}
	if top {
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == "kind" })
		return fmt.Sprintf("%s; %q is not one of: %s", msg, key, strings.Join(keys, ", "))
	}
	return fmt.Sprintf("%s; %q is not one of the keys of %s: %s", msg, key, path, strings.Join(keys, ", "))
}

// jsonKeys lists the keys encoding/json decodes into t's fields, in field
// order.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if name, ok := jsonName(f); ok {
			keys = append(keys, name)
		}
	}
	return keys
}

// field finds the field encoding/json would fill from key: an exact name
// first, then a case-insensitive one, as the decoder does.
func field(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold *reflect.StructField
	for f := range t.Fields() {
		name, ok := jsonName(f)
		switch {
		case !ok:
		case name == key:
			return f, true
		case fold == nil && strings.EqualFold(name, key):
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// DecodeConfig unmarshals an adapter's section (raw JSON) into v, a pointer,
// with exact numbers. The top-level key `kind` is ignored. A key that v's
// structs have no field for is refused with a *ConfigError naming its dotted
// path and the keys allowed there, at any depth. ConfigureRequest's
// DecodeConfig method does the same and names the kind in the refusal.
func DecodeConfig(raw json.RawMessage, v any) error { return decodeConfig("", raw, v) }

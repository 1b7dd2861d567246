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
		return nil // the type decodes (and refuses) its own keys, as param.Value does
	}
	if want := wrongType(raw, t); want != "" && !top {
		return &ConfigError{Path: path, Message: want}
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
			if err := refuseUnknown(kind, at, m[k], f.typ, false); err != nil {
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

// wrongType says what a value of type t must be when raw, a JSON value, is
// of another type ("" when it fits, or is null); encoding/json would refuse
// it without naming the key's path.
func wrongType(raw json.RawMessage, t reflect.Type) string {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	isNumber := v[0] == '-' || (v[0] >= '0' && v[0] <= '9')
	switch {
	case t == reflect.TypeFor[json.Number]():
		if !isNumber && v[0] != '"' {
			return "must be a number"
		}
	case t == reflect.TypeFor[json.RawMessage]():
	case t.Kind() == reflect.String:
		if v[0] != '"' {
			return "must be a string"
		}
	case t.Kind() == reflect.Bool:
		if v[0] != 't' && v[0] != 'f' {
			return "must be true or false"
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if _, err := strconv.ParseInt(string(v), 10, t.Bits()); err != nil {
			return "must be a whole number"
		}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
		if _, err := strconv.ParseUint(string(v), 10, t.Bits()); err != nil {
			return "must be a whole number, 0 or more"
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if !isNumber {
			return "must be a number"
		}
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		if v[0] != '{' {
			return "must be a map"
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8, t.Kind() == reflect.Array:
		if v[0] != '[' {
			return "must be a list"
		}
	}
	return ""
}

// jsonField is a key encoding/json decodes into a struct, and the type of
// the field it fills.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the keys encoding/json decodes into t's fields, in field
// order, with the fields of an embedded struct (untagged) in its place, as
// encoding/json promotes them.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// jsonKeys lists the keys of t, in field order.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for _, f := range jsonFields(t) {
		keys = append(keys, f.name)
	}
	return keys
}

// field finds the field encoding/json would fill from key: an exact name
// first, then a case-insensitive one, as the decoder does.
func field(t reflect.Type, key string) (jsonField, bool) {
	var fold *jsonField
	for _, f := range jsonFields(t) {
		switch {
		case f.name == key:
			return f, true
		case fold == nil && strings.EqualFold(f.name, key):
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return jsonField{}, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// decodeConfig decodes an adapter's section into v (a pointer) with the
// strict decoder (sdk/unstable/strict): exact numbers (json.Number where v holds
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
			return &refusal.Error{Message: "the section must be a map of settings"}
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

// configError is the strict decoder's refusal as a *refusal.Error, the
// adapter's kind named in an unknown key's.
func configError(kind string, err error) error {
	se, ok := errors.AsType[*strict.Error](err)
	if !ok {
		return &refusal.Error{Message: err.Error()}
	}
	msg := se.Message
	if se.Code == strict.CodeUnknownKey && kind != "" {
		msg = "unknown key for kind " + kind + strings.TrimPrefix(msg, "unknown key")
	}
	return &refusal.Error{Path: se.Path, Message: msg}
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
		return &refusal.Error{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %s", kind, strict.Describe(named))}
	case s != kind:
		return &refusal.Error{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %q", kind, s)}
	}
	return nil
}

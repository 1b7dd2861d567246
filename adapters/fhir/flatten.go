package fhir

import (
	"fmt"
	"maps"
	"slices"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/sdk"
)

// fieldPaths maps a record field to a path into each resource.
type fieldPaths map[string]httpx.Path

// parseFieldPaths reads field_paths: record field -> dotted path, where a
// segment of digits indexes an array (code.coding.0.code). Arrays are never
// entered implicitly: which element counts is the operator's choice.
func parseFieldPaths(raw map[string]string) (fieldPaths, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(fieldPaths, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if name == "" {
			return nil, &sdk.ConfigError{Path: "field_paths", Message: "a record field name is empty"}
		}
		p, err := httpx.ParsePath(raw[name])
		if err != nil {
			return nil, &sdk.ConfigError{Path: "field_paths." + name, Message: err.Error()}
		}
		out[name] = p
	}
	return out, nil
}

// flatten makes one record of a resource. Without field paths the record is
// the resource itself (nested values compare as compact JSON). A path that
// leads nowhere, or to null, leaves the field out: the judge treats a
// missing field as having no value, so it never matches.
func (fp fieldPaths) flatten(resource map[string]any) sdk.Record {
	if fp == nil {
		return sdk.Record(resource)
	}
	rec := make(sdk.Record, len(fp))
	for name, p := range fp {
		if v, found := p.Lookup(resource); found == httpx.Present {
			rec[name] = v
		}
	}
	return rec
}

func (fp fieldPaths) String() string {
	if fp == nil {
		return "the whole resource"
	}
	return fmt.Sprintf("%d field paths", len(fp))
}

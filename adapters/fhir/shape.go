package fhir

import (
	"fmt"
	"slices"

	"github.com/verifierd/verifierd/sdk"
)

// listsInReadFields fails the read c when a field that a contract of req
// selects on or reads (the selector's fields and ReadFields) holds a list
// in a record: a field_paths path that ends at an array, or a whole
// resource's repeating element. The judge matches a list with no value, so
// the record would be invisible to the contract and the read would look as
// if it had not been written (sdk.ShapeError). A list in a field no
// contract reads stays as it is. c holds every page already, so its
// records can be read twice.
func listsInReadFields(c sdk.Capture, req sdk.CaptureRequest) sdk.Capture {
	if !c.Reachable || c.Records == nil {
		return c
	}
	fields := slices.Clone(req.ReadFields)
	for f := range req.Selector {
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return c
	}
	for rec, err := range c.Records {
		if err != nil {
			return c
		}
		for _, f := range fields {
			if list, ok := rec[f].([]any); ok {
				return sdk.Unshapeable(&sdk.ShapeError{Record: recordName(rec), Field: f, Reason: fmt.Sprintf(
					"holds a list of %d values, which no contract value matches; point field_paths.%s at one element, with an index (.0) or a key[name=value] selector", len(list), f)})
			}
		}
	}
	return c
}

// recordName names a record in a reason: its id, when it has one.
func recordName(rec sdk.Record) string {
	if id, ok := rec["id"]; ok {
		return fmt.Sprintf("with id %v", id)
	}
	return "without an id (field_paths maps none)"
}

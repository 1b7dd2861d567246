package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/internal/apijson"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// The API's JSON shapes (docs/http-api.md): run parameters are JSON
// scalars, records and receipts JSON objects. This file converts between
// them and what the session and the judge take: parameter text, record
// JSON with exact number text, stored receipt bytes.

// maxExactInteger is 2^53: every integer up to it in magnitude is a double
// exactly, and beyond it a double no longer tells neighbouring integers
// apart.
const maxExactInteger = 1 << 53

// paramTexts returns the text the daemon binds for each run parameter: a
// string as is, a boolean as true or false, a number as the shortest
// decimal of its double. An integer beyond ±2^53 is refused (the double
// may already be a neighbour of what the caller meant), and so are null,
// objects and arrays, each naming params.<name>.
func paramTexts(ps map[string]*structpb.Value) (map[string]string, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(ps))
	for name, v := range ps {
		text, problem := paramText(v)
		if problem != "" {
			return nil, invalid("params."+clip(name), problem)
		}
		out[name] = text
	}
	return out, nil
}

func paramText(v *structpb.Value) (string, string) {
	const scalar = "a run parameter is one value: a string, a number or true/false, not %s; send it as one of those"
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue, ""
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue), ""
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", "a run parameter's number must be finite; send a number or a string"
		}
		if math.Abs(f) > maxExactInteger && f == math.Trunc(f) {
			return "", "an integer beyond ±2^53 cannot be carried exactly as a number (a double); send it as a string of its digits"
		}
		return strconv.FormatFloat(f, 'f', -1, 64), ""
	case *structpb.Value_StructValue:
		return "", fmt.Sprintf(scalar, "an object")
	case *structpb.Value_ListValue:
		return "", fmt.Sprintf(scalar, "an array")
	}
	return "", fmt.Sprintf(scalar, "null")
}

// recordJSON writes one record of a Judge read as JSON text, which the
// judge then reads as it reads any record: a number as the shortest
// decimal of its double, so that nothing is added to or taken from it. A
// record nested deeper than jsondepth.Max levels is refused at path.
func recordJSON(s *structpb.Struct, path string) ([]byte, error) {
	var b strings.Builder
	if err := writeStruct(&b, s, path, 1); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func writeStruct(b *strings.Builder, s *structpb.Struct, path string, depth int) error {
	if depth > jsondepth.Max {
		return invalid(path, fmt.Sprintf("nested more than %d levels of objects and arrays; flatten the value", jsondepth.Max))
	}
	b.WriteByte('{')
	fields := s.GetFields()
	for i, k := range slices.Sorted(maps.Keys(fields)) {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k)
		b.WriteByte(':')
		if err := writeValue(b, fields[k], path+"."+k, depth); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func writeValue(b *strings.Builder, v *structpb.Value, path string, depth int) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		writeString(b, k.StringValue)
	case *structpb.Value_BoolValue:
		b.WriteString(strconv.FormatBool(k.BoolValue))
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return invalid(path, "a record's number must be finite (JSON has no NaN or infinity)")
		}
		b.WriteString(strconv.FormatFloat(k.NumberValue, 'g', -1, 64))
	case *structpb.Value_StructValue:
		return writeStruct(b, k.StructValue, path, depth+1)
	case *structpb.Value_ListValue:
		if depth+1 > jsondepth.Max {
			return invalid(path, fmt.Sprintf("nested more than %d levels of objects and arrays; flatten the value", jsondepth.Max))
		}
		b.WriteByte('[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, e, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		b.WriteString("null")
	}
	return nil
}

func writeString(b *strings.Builder, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// recordStruct is a matched record as a JSON object. A number stays a
// number when a double carries it exactly (its canonical decimal is the
// same, so 1234.50 is 1234.5); one that a double would round (more
// significant digits than a double holds, such as a 19-digit id) is given
// as a string of its exact digits, so that evidence never shows a number
// the record did not hold.
func recordStruct(r judge.Record) *structpb.Struct {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(r))}
	for k, v := range r {
		s.Fields[k] = evidenceValue(v)
	}
	return s
}

func evidenceValue(v any) *structpb.Value {
	switch x := v.(type) {
	case nil:
		return structpb.NewNullValue()
	case string:
		return structpb.NewStringValue(x)
	case bool:
		return structpb.NewBoolValue(x)
	case json.Number:
		return exactNumber(string(x))
	case map[string]any:
		return structpb.NewStructValue(recordStruct(x))
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			l.Values[i] = evidenceValue(e)
		}
		return structpb.NewListValue(l)
	}
	// float64 and the Go integer types: their canonical text, exactly.
	if text, ok := judge.Canon(v); ok {
		return exactNumber(text)
	}
	return structpb.NewNullValue()
}

// exactNumber is the JSON number text as a number when a double holds it
// exactly (apijson.DoubleExact), else as a string of the text.
func exactNumber(text string) *structpb.Value {
	if apijson.DoubleExact(text) {
		f, _ := strconv.ParseFloat(text, 64)
		return structpb.NewNumberValue(f)
	}
	return structpb.NewStringValue(text)
}

// envelopeStruct is a stored DSSE envelope (a receipt or a checkpoint) as
// a JSON object; nil when there is none.
func envelopeStruct(raw []byte) (*structpb.Struct, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("a stored envelope is not a JSON object: %w", err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("a stored envelope: %w", err)
	}
	return s, nil
}

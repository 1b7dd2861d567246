package verifierv1

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"
)

// StringParams is a map of run parameters written as strings, in the
// shape the requests carry them (each a google.protobuf.Value). A nil or
// empty map gives nil.
func StringParams(kv map[string]string) map[string]*structpb.Value {
	if len(kv) == 0 {
		return nil
	}
	out := make(map[string]*structpb.Value, len(kv))
	for k, v := range kv {
		out[k] = structpb.NewStringValue(v)
	}
	return out
}

// EnvelopeJSON is a receipt or checkpoint the API returns as a JSON object
// (a DSSE envelope), written back as JSON text with sorted keys, for
// receipt.Verify or a file; nil when s is nil. The signature covers the
// envelope's payload, not these bytes, so any faithful encoding verifies.
func EnvelopeJSON(s *structpb.Struct) []byte {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s.AsMap())
	if err != nil {
		return nil // an envelope holds strings only
	}
	return b
}

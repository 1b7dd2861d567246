package verifierv1_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestStringParams: each value becomes a string Value; an empty map, nil.
func TestStringParams(t *testing.T) {
	got := verifierv1.StringParams(map[string]string{"patient_id": "p1", "note": "007"})
	if len(got) != 2 || got["patient_id"].GetStringValue() != "p1" || got["note"].GetStringValue() != "007" {
		t.Fatalf("StringParams = %v, want patient_id p1 and note \"007\" as strings", got)
	}
	if got := verifierv1.StringParams(map[string]string{}); got != nil {
		t.Fatalf("StringParams(empty) = %v, want nil", got)
	}
}

// TestEnvelopeJSON: a Struct is written back as a JSON object with sorted
// keys; nil gives nil.
func TestEnvelopeJSON(t *testing.T) {
	s, err := structpb.NewStruct(map[string]any{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": []any{map[string]any{"keyid": "k", "sig": "c2ln"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"keyid":"k","sig":"c2ln"}]}`
	if got := string(verifierv1.EnvelopeJSON(s)); got != want {
		t.Fatalf("EnvelopeJSON = %s, want %s", got, want)
	}
	if got := verifierv1.EnvelopeJSON(nil); got != nil {
		t.Fatalf("EnvelopeJSON(nil) = %q, want nil", got)
	}
}

// TestOpenAPI: the embedded document is Swagger 2.0 naming the routes, and
// OpenAPI returns a copy the caller may change.
func TestOpenAPI(t *testing.T) {
	var doc struct {
		Swagger string         `json:"swagger"`
		Paths   map[string]any `json:"paths"`
	}
	b := verifierv1.OpenAPI()
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("OpenAPI() is not JSON: %v", err)
	}
	if doc.Swagger != "2.0" {
		t.Fatalf("swagger = %q, want 2.0", doc.Swagger)
	}
	for _, p := range []string{"/v1/judge", "/v1/runs", "/v1/info"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("the document has no route %s", p)
		}
	}
	b[0] = 'x'
	if verifierv1.OpenAPI()[0] == 'x' {
		t.Fatal("OpenAPI returned the embedded document itself, not a copy")
	}
}

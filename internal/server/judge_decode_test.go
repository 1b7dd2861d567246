package server

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// records parses each JSON object into the google.protobuf.Struct a Read
// carries.
func records(t *testing.T, objs ...string) []*structpb.Struct {
	t.Helper()
	out := make([]*structpb.Struct, len(objs))
	for i, o := range objs {
		out[i] = &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(o), out[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return out
}

// deep is a record {"x": [[[...]]]} nested n levels.
func deep(n int) *structpb.Struct {
	v := structpb.NewListValue(&structpb.ListValue{})
	for range n - 1 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{"x": v}}
}

// TestJudgeRPCRecords: the Judge RPC's records are JSON objects that the
// judge reads as any record: numbers compare by canonical text (1 and 1.0
// are one identity), a new record is counted and its matched record comes
// back as an object; a record nested past the bound is refused with its
// path.
func TestJudgeRPCRecords(t *testing.T) {
	t.Parallel()
	a := startAPI(t, Options{}, nil)
	c := verifierv1.NewVerifierServiceClient(a.conn)
	res, err := c.Judge(t.Context(), &verifierv1.JudgeRequest{
		Effects: `[{"kind": "record_written", "match": {"p": "p1", "n": "2.5"}, "count_new_only": true}]`,
		Before:  &verifierv1.Read{Reachable: true, Records: records(t, `{"id": 1, "p": "p0"}`)},
		After:   &verifierv1.Read{Reachable: true, Records: records(t, `{"id": 1.0, "p": "p0"}`, `{"id": 2, "p": "p1", "n": 2.50, "s": "Zo\u00eb"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetOutcome() != verifierv1.Outcome_VERIFIED || len(res.GetEffects()) != 1 {
		t.Fatalf("outcome %v with %d effects", res.GetOutcome(), len(res.GetEffects()))
	}
	e := res.GetEffects()[0]
	if e.GetObservedCount() != 1 || len(e.GetMatchedRecords()) != 1 {
		t.Fatalf("observed %d, matched %v", e.GetObservedCount(), e.GetMatchedRecords())
	}
	if got, _ := json.Marshal(e.GetMatchedRecords()[0].AsMap()); string(got) != `{"id":2,"n":2.5,"p":"p1","s":"Zoë"}` {
		t.Errorf("matched record %s", got)
	}

	_, err = c.Judge(t.Context(), &verifierv1.JudgeRequest{
		Effects: `[{"kind": "record_written", "match": {"p": "p1"}}]`,
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true, Records: []*structpb.Struct{records(t, `{"p": "p1"}`)[0], deep(100)}},
	})
	if f := fieldOf(err); !strings.HasPrefix(f, "after.records[1].x") {
		t.Fatalf("a record 100 levels deep: %v (field %q), want InvalidArgument at after.records[1].x…", err, f)
	}
}

// TestEvidenceNumbersExact: a matched record's number stays a number when
// a double holds it exactly and becomes the string of its digits when a
// double would round it; other values keep their JSON type.
func TestEvidenceNumbersExact(t *testing.T) {
	t.Parallel()
	rec := judge.Record{
		"small": json.Number("36"), "decimal": json.Number("1234.50"), "exp": json.Number("1e3"),
		"snowflake": json.Number("1234567890123456789"), "pi": json.Number("3.14159265358979323846"),
		"f": 0.5, "i": int64(1 << 60), "s": "x", "b": true, "null": nil,
		"nested": map[string]any{"n": json.Number("12345678901234567891")}, "list": []any{json.Number("7")},
	}
	got, err := json.Marshal(recordStruct(rec).AsMap())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":true,"decimal":1234.5,"exp":1000,"f":0.5,"i":"1152921504606846976","list":[7],"nested":{"n":"12345678901234567891"},"null":null,"pi":"3.14159265358979323846","s":"x","small":36,"snowflake":"1234567890123456789"}`
	if string(got) != want {
		t.Errorf("evidence\n got %s\nwant %s", got, want)
	}
}

// TestParamTexts: each JSON scalar binds its text; an integer a double
// cannot hold exactly, null, an object and an array are refused naming
// params.<name>.
func TestParamTexts(t *testing.T) {
	t.Parallel()
	got, err := paramTexts(map[string]*structpb.Value{
		"s": structpb.NewStringValue("Ada"), "n": structpb.NewNumberValue(36), "d": structpb.NewNumberValue(1234.5),
		"b": structpb.NewBoolValue(false), "max": structpb.NewNumberValue(1 << 53),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s": "Ada", "n": "36", "d": "1234.5", "b": "false", "max": "9007199254740992"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("params.%s = %q, want %q", k, got[k], v)
		}
	}
	for name, v := range map[string]*structpb.Value{
		"big": structpb.NewNumberValue(1 << 60), "nan": structpb.NewNumberValue(math.NaN()),
		"null": structpb.NewNullValue(), "obj": structpb.NewStructValue(&structpb.Struct{}),
		"list": structpb.NewListValue(&structpb.ListValue{}), "unset": {},
	} {
		_, err := paramTexts(map[string]*structpb.Value{name: v})
		if fieldOf(err) != "params."+name {
			t.Errorf("params.%s: %v, want a refusal naming params.%s", name, err, name)
		}
	}
}

// fieldOf is the field a refusal's BadRequest detail names.
func fieldOf(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

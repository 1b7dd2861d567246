package server

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestJudgeRPCFastDecoder: the Judge RPC's records go through the fast
// decoder: numbers compare by canonical text (1 and "1.0" are one
// identity), a new record is counted, its matched record comes back, and a
// duplicate key is refused with the record's path.
func TestJudgeRPCFastDecoder(t *testing.T) {
	t.Parallel()
	a := startAPI(t, Options{}, nil)
	c := verifierv1.NewVerifierServiceClient(a.conn)
	recs := func(rs ...string) [][]byte {
		out := make([][]byte, len(rs))
		for i, r := range rs {
			out[i] = []byte(r)
		}
		return out
	}
	res, err := c.Judge(t.Context(), &verifierv1.JudgeRequest{
		Effects: []byte(`[{"kind": "record_written", "match": {"p": "p1", "n": "2.5"}, "count_new_only": true}]`),
		Before:  &verifierv1.Read{Reachable: true, RecordsJson: recs(`{"id": 1, "p": "p0"}`)},
		After:   &verifierv1.Read{Reachable: true, RecordsJson: recs(`{"id": 1.0, "p": "p0"}`, `{"id": 2, "p": "p1", "n": 2.50, "s": "Zo\u00eb"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.GetResult()
	if r.GetOutcome() != verifierv1.Outcome_OUTCOME_VERIFIED || len(r.GetEffects()) != 1 {
		t.Fatalf("outcome %v with %d effects", r.GetOutcome(), len(r.GetEffects()))
	}
	e := r.GetEffects()[0]
	if e.GetObservedCount() != 1 || len(e.GetMatchedRecordsJson()) != 1 {
		t.Fatalf("observed %d, matched %q", e.GetObservedCount(), e.GetMatchedRecordsJson())
	}
	if got := string(e.GetMatchedRecordsJson()[0]); got != `{"id":2,"n":2.5,"p":"p1","s":"Zoë"}` && got != `{"id":2,"n":2.5,"p":"p1","s":"Zo\u00eb"}` {
		t.Errorf("matched record %s", got)
	}

	_, err = c.Judge(t.Context(), &verifierv1.JudgeRequest{
		Effects: []byte(`[{"kind": "record_written", "match": {"p": "p1"}}]`),
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true, RecordsJson: recs(`{"id": 1}`, `{"id": 2, "id": 3}`)},
	})
	if status.Code(err) != codes.InvalidArgument || fieldOf(err) != "after.records_json[1].id" {
		t.Fatalf("duplicate key: %v (field %q), want InvalidArgument at after.records_json[1].id", err, fieldOf(err))
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

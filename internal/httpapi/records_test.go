package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/verifierd/verifierd/internal/server"
)

// TestJudgeRecordNumbersExact: over HTTP a Judge record's number that a
// double would round is refused with InvalidArgument naming its path
// (snake_case or lowerCamelCase keys alike); a number a double holds, and
// the same digits as a string, reach the service.
func TestJudgeRecordNumbersExact(t *testing.T) {
	t.Parallel()
	c := serveGateway(t)
	for body, path := range map[string]string{
		`{"effects": "[]", "before": {"reachable": true}, "after": {"reachable": true, "records": [{"id": 1}, {"x": [1, {"id": 1234567890123456789}]}]}}`: "after.records[1].x[1].id",
		`{"effects": "[]", "before": {"reachable": true, "records": [{"amount": 3.14159265358979323846}]}}`:                                               "before.records[0].amount",
	} {
		code, res := c.do("POST", "/v1/judge", body, token)
		msg, _ := res["message"].(string)
		if code != http.StatusBadRequest || res["code"] != float64(codes.InvalidArgument) || !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, "send it as a string") {
			t.Errorf("%s: %d %v, want 400 InvalidArgument naming %s", body, code, res, path)
		}
	}
	for _, body := range []string{
		`{"effects": "[]", "before": {"reachable": true}, "after": {"reachable": true, "records": [{"id": 36, "amount": 1234.50, "e": 1e3}]}}`,
		`{"effects": "[]", "before": {"reachable": true}, "after": {"reachable": true, "records": [{"id": "1234567890123456789"}]}}`,
		`{"effects": "[]", "params": {"id": 1234567890123456789}, "before": {"reachable": true}, "after": {"reachable": true}}`,
	} {
		if code, res := c.do("POST", "/v1/judge", body, token); code != http.StatusNotImplemented {
			t.Errorf("%s: %d %v, want it to reach the service (501 from the stub)", body, code, res)
		}
	}
}

// TestWalkRecordsSplits: the walk of a Judge body notes each record's
// bytes by read and the records arrays' spans, so that the body without
// them is the request with empty records; a record that is not an object
// is named; a malformed body is left whole.
func TestWalkRecordsSplits(t *testing.T) {
	t.Parallel()
	body := `{"effects": "[]", "before": {"reachable": true, "records": [ {"id": "0"} ]}, "after": {"records": [{"id": 1, "x": [{"y": 2}]}, {"id": "2"}], "reachable": true}}`
	walk := walkRecords([]byte(body), 3)
	if walk.over != "" || walk.path != "" || walk.notObject != "" {
		t.Fatalf("walk: %+v", walk)
	}
	if got := walk.reads[0]; len(got) != 1 || string(got[0]) != `{"id": "0"}` {
		t.Errorf("before records %q", got)
	}
	if got := walk.reads[1]; len(got) != 2 || string(got[0]) != `{"id": 1, "x": [{"y": 2}]}` || string(got[1]) != `{"id": "2"}` {
		t.Errorf("after records %q", got)
	}
	want := `{"effects": "[]", "before": {"reachable": true, "records": []}, "after": {"records": [], "reachable": true}}`
	if got := string(withoutRecords([]byte(body), walk.arrays)); got != want {
		t.Errorf("without records:\n%s\nwant\n%s", got, want)
	}
	if w := walkRecords([]byte(body), 2); w.over != "after.records" || len(w.arrays) != 0 {
		t.Errorf("over the limit: %+v, want over after.records", w)
	}
	if w := walkRecords([]byte(`{"after": {"records": [{"id": 1}, 7]}}`), 0); w.notObject != "after.records[1]" {
		t.Errorf("a number as a record: %+v, want notObject after.records[1]", w)
	}
	if w := walkRecords([]byte(`{"after": {"records": [{"id": 1}`), 0); len(w.arrays)+len(w.reads[1]) != 0 {
		t.Errorf("malformed: %+v, want nothing taken", w)
	}
}

// TestJudgeRecordsDecodedApart: over HTTP the service judges the records
// the walk took out of the body, each decoded on its own: a record of the
// patient is VERIFIED, none REFUTED, a record with a repeated name or a
// record that is not an object is refused naming it.
func TestJudgeRecordsDecodedApart(t *testing.T) {
	t.Parallel()
	api := New(token)
	if err := RegisterGateway(api, server.Service(nil, nil), server.Chain(server.Options{BearerToken: token})); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c := client{t: t, url: srv.URL, bodies: new([]string)}
	const effects = `"[{\"kind\": \"record_written\", \"match\": {\"patient_id\": \"p1\"}}]"`
	judge := func(after string) (int, map[string]any) {
		return c.do("POST", "/v1/judge", `{"effects": `+effects+`, "before": {"reachable": true, "records": []}, "after": {"reachable": true, "records": [`+after+`]}}`, token)
	}
	if code, res := judge(`{"patient_id": "p2"}, {"patient_id": "p1", "n": 1.5}`); code != http.StatusOK || res["outcome"] != "VERIFIED" {
		t.Errorf("the patient's record: %d %v, want 200 VERIFIED", code, res)
	}
	if code, res := judge(`{"patient_id": "p2"}`); code != http.StatusOK || res["outcome"] == "VERIFIED" {
		t.Errorf("another patient's record: %d %v, want 200 and not VERIFIED", code, res)
	}
	for after, path := range map[string]string{
		`{"patient_id": "p1"}, {"id": 1, "id": 2}`: "after.records[1]",
		`{"patient_id": "p1"}, "p1"`:               "after.records[1]",
	} {
		code, res := judge(after)
		if msg, _ := res["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, path) {
			t.Errorf("%s: %d %v, want 400 naming %s", after, code, res, path)
		}
	}
}

package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
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

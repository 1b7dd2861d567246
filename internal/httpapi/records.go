package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/apijson"
)

// exactRecords guards the records of a Judge body (before.records and
// after.records, google.protobuf.Struct objects) before the gateway's JSON
// reader builds them. Their count: a body with more than the API's
// --max-judge-records records in all is refused with 413 (InvalidArgument
// in the gateway's shape) naming the limit and the flag, counted while
// walking, before any record is built. Their numbers, which the gateway's
// reader turns into doubles: a number that a double would round (a
// 19-digit id, more decimals than a double holds) is refused with
// InvalidArgument naming its path, before it could be judged as the
// neighbour it would become. Sent as a string, the same digits compare
// exactly. Any other body reaches the gateway unchanged; a malformed one
// is left for the gateway to refuse. The body has passed shallowBody, so
// the walk's stack is bounded.
func exactRecords(gw *runtime.ServeMux, m runtime.Marshaler, a *API, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), r.Body))
			next(w, r)
			return
		}
		walk := walkRecords(raw, a.maxJudgeRecords)
		if walk.over != "" {
			msg := fmt.Sprintf("the request carries more than %d records, the daemon's limit (--max-judge-records); split the read", a.maxJudgeRecords)
			runtime.HTTPError(r.Context(), gw, m, statusAs{w, http.StatusRequestEntityTooLarge}, r, fieldError(walk.over, msg))
			return
		}
		if walk.path != "" {
			msg := fmt.Sprintf("the number %s has more digits than a JSON number read as a double keeps, and would be judged as another number; send it as a string", clip(walk.number))
			runtime.HTTPError(r.Context(), gw, m, w, r, fieldError(walk.path, walk.path+": "+msg))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		next(w, r)
	}
}

// fieldError is InvalidArgument with the field's violation as its detail.
func fieldError(path, msg string) error {
	st := status.New(codes.InvalidArgument, msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: path, Description: msg}}}); err == nil {
		st = d
	}
	return st.Err()
}

// statusAs answers with code, whatever status the handler writes.
type statusAs struct {
	http.ResponseWriter
	code int
}

func (s statusAs) WriteHeader(int) { s.ResponseWriter.WriteHeader(s.code) }

// frame is one open object or array of the walk, with the member key or
// element index the walk is at.
type frame struct {
	object bool
	key    string
	index  int
	// wantKey: in an object, the next string token is a member name.
	wantKey bool
}

// recordWalk is what walkRecords found: the path and text of the first
// number under before.records or after.records that apijson.DoubleExact
// refuses, or the records array where the count passed the limit (over).
type recordWalk struct {
	path, number string
	over         string
}

// walkRecords walks the body's tokens (one value at a time, no tree),
// counting the records of before.records and after.records against limit
// (0: no limit) and checking their numbers; a zero recordWalk when all is
// well or the body is not JSON (the gateway answers that).
func walkRecords(raw []byte, limit int) recordWalk {
	if !bytes.Contains(raw, []byte(`"records"`)) {
		return recordWalk{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	records := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return recordWalk{} // the end, or malformed: the gateway's to answer
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].wantKey = key, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			afterValue(stack)
			continue
		}
		if n := len(stack); n > 0 && !stack[n-1].object {
			stack[n-1].index++
		}
		if len(stack) == 3 && inRecords(stack) {
			if records++; limit > 0 && records > limit {
				return recordWalk{over: pathOf(stack[:2])}
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			stack = append(stack, frame{object: v == '{', wantKey: v == '{', index: -1})
			continue
		case json.Number:
			if inRecords(stack) && !apijson.DoubleExact(string(v)) {
				return recordWalk{path: pathOf(stack), number: string(v)}
			}
		}
		afterValue(stack)
	}
}

// afterValue marks that the innermost object's member value has ended.
func afterValue(stack []frame) {
	if n := len(stack); n > 0 && stack[n-1].object {
		stack[n-1].wantKey = true
	}
}

// inRecords reports whether the walk is inside {before|after}.records[i].
func inRecords(stack []frame) bool {
	return len(stack) >= 3 && stack[0].object && (stack[0].key == "before" || stack[0].key == "after") &&
		stack[1].object && stack[1].key == "records" && !stack[2].object
}

// pathOf renders the walk's position as after.records[0].id.
func pathOf(stack []frame) string {
	var b strings.Builder
	for i, f := range stack {
		if f.object {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(clip(f.key))
			continue
		}
		fmt.Fprintf(&b, "[%d]", f.index)
	}
	return b.String()
}

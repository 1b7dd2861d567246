package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/apijson"
	"github.com/verifierd/verifierd/internal/judgestream"
)

// exactRecords guards the records of a Judge body (before.records and
// after.records, google.protobuf.Struct objects) and takes them out of the
// body before the gateway's JSON reader sees it, in one walk of the body's
// tokens that builds no tree. Their count: a body with more than the API's
// --max-judge-records records in all is refused with 413 (InvalidArgument
// in the gateway's shape) naming the limit and the flag, counted while
// walking, before any record is decoded. Each record must be a JSON
// object (else 400 naming it). Their numbers, which the reader turns into
// doubles: a number that a double would round (a 19-digit id, more
// decimals than a double holds) is refused with InvalidArgument naming its
// path, before it could be judged as the neighbour it would become. Sent
// as a string, the same digits compare exactly. The gateway then decodes
// the body with empty records arrays, and the service decodes each record
// on its own from the body's bytes (judgestream, as over gRPC), so no tree
// of every record's Struct is ever built. A malformed body reaches the
// gateway unchanged, for it to refuse. The body has passed shallowBody, so
// the walk's stack is bounded.
func exactRecords(gw *runtime.ServeMux, m runtime.Marshaler, a *API, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := readAll(r)
		if err != nil {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), r.Body))
			next(w, r)
			return
		}
		walk := walkRecords(raw, a.maxJudgeRecords)
		switch {
		case walk.over != "":
			msg := fmt.Sprintf("the request carries more than %d records, the daemon's limit (--max-judge-records); split the read", a.maxJudgeRecords)
			runtime.HTTPError(r.Context(), gw, m, statusAs{w, http.StatusRequestEntityTooLarge}, r, fieldError(walk.over, msg))
			return
		case walk.path != "":
			msg := fmt.Sprintf("the number %s has more digits than a JSON number read as a double keeps, and would be judged as another number; send it as a string", clip(walk.number))
			runtime.HTTPError(r.Context(), gw, m, w, r, fieldError(walk.path, walk.path+": "+msg))
			return
		case walk.notObject != "":
			runtime.HTTPError(r.Context(), gw, m, w, r, fieldError(walk.notObject, walk.notObject+": each record is one JSON object"))
			return
		}
		if len(walk.arrays) == 0 {
			r.Body = memBody(raw)
			next(w, r)
			return
		}
		rest := withoutRecords(raw, walk.arrays)
		r.Body, r.ContentLength = memBody(rest), int64(len(rest))
		next(w, r.WithContext(judgestream.With(r.Context(), &judgestream.Records{Form: judgestream.JSON, Reads: walk.reads})))
	}
}

// withoutRecords is raw with each records array (start and end offsets,
// in order) written as [].
func withoutRecords(raw []byte, arrays [][2]int64) []byte {
	out := make([]byte, 0, 256)
	prev := int64(0)
	for _, span := range arrays {
		out = append(out, raw[prev:span[0]]...)
		out = append(out, "[]"...)
		prev = span[1]
	}
	return append(out, raw[prev:]...)
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
// refuses, the records array where the count passed the limit (over), or
// the first record that is not an object (notObject); else the records
// arrays' offsets in the body and each read's records (sub-slices of it).
type recordWalk struct {
	path, number string
	over         string
	notObject    string
	arrays       [][2]int64
	reads        [2][][]byte
}

// walkRecords walks the body's tokens (one value at a time, no tree),
// counting the records of before.records and after.records against limit
// (0: no limit), checking their numbers and noting where each record and
// each records array starts and ends; a zero recordWalk when the body is
// not JSON (the gateway answers that).
func walkRecords(raw []byte, limit int) recordWalk {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	var out recordWalk
	var arrayStart, recordStart int64
	records := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) && len(stack) == 0 {
			return out
		}
		if err != nil {
			return recordWalk{} // malformed (or cut short): the gateway's to answer
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].wantKey = key, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if len(stack) == 3 && inRecords(stack) {
				out.arrays = append(out.arrays, [2]int64{arrayStart, dec.InputOffset()})
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 3 && inRecords(stack) {
				out.reads[readOf(stack)] = append(out.reads[readOf(stack)], raw[recordStart:dec.InputOffset()])
			}
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
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return recordWalk{notObject: pathOf(stack)}
			}
			recordStart = dec.InputOffset() - 1
		}
		switch v := tok.(type) {
		case json.Delim:
			stack = append(stack, frame{object: v == '{', wantKey: v == '{', index: -1})
			if len(stack) == 3 && inRecords(stack) {
				arrayStart = dec.InputOffset() - 1
			}
			continue
		case json.Number:
			if inRecords(stack) && !apijson.DoubleExact(string(v)) {
				return recordWalk{path: pathOf(stack), number: string(v)}
			}
		}
		afterValue(stack)
	}
}

// readOf is the read the walk is in: 0 before, 1 after.
func readOf(stack []frame) int {
	if stack[0].key == "after" {
		return 1
	}
	return 0
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

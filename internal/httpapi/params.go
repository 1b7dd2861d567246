package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/internal/jsonobj"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// paramRoutes are the gateway routes whose request carries run parameters
// (a top-level "params" map of google.protobuf.Value scalars).
var paramRoutes = map[string]bool{
	"POST /v1/connection-tests": true,
	"POST /v1/sessions":         true,
	"POST /v1/judge":            true,
}

// ParamText is the text a run parameter written as a JSON value stands
// for, the same text the gRPC API takes: a string as is, a number as its
// JSON text exactly as written (36, 1234.50, 1e3: the digits the caller
// sent, so nothing is lost to a float), a boolean as true or false. null,
// objects and arrays have none (false): a run parameter is one scalar.
func ParamText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		if !jsonnum.Valid(string(x)) {
			return "", false
		}
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// scalarParams keeps the digits of a run parameter written as a JSON
// number, which the protobuf JSON mapping would read into a
// google.protobuf.Value's double (1234.50 would bind 1234.5, a 25-digit id
// a rounded neighbour): each number and boolean becomes the string of its
// text (ParamText) before the gateway reads the body, which binds the same
// text. A body that is not a JSON object, has no params object, or whose
// params are all strings reaches the gateway unchanged (it answers
// anything malformed itself). A null, object or array value is refused
// here with InvalidArgument naming params.<name>, in the gateway's error
// shape, as the service would refuse it.
func scalarParams(gw *runtime.ServeMux, m runtime.Marshaler, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := readAll(r)
		if err != nil {
			// Over the size bound or a broken body: the gateway's own
			// reading of what is left gives its usual answer.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), r.Body))
			next(w, r)
			return
		}
		body, refusal := rewriteParams(raw)
		if refusal != nil {
			runtime.HTTPError(r.Context(), gw, m, w, r, refusal)
			return
		}
		r.Body = memBody(body)
		r.ContentLength = int64(len(body))
		next(w, r)
	}
}

// rewriteParams returns the body with every non-string run parameter
// replaced by its text, or the refusal of one that has none. Only the
// top-level members are split (json.Decoder, one value at a time, depth
// bounded by encoding/json) and only params is decoded, so a large Judge
// body costs one scan, not a tree.
func rewriteParams(raw []byte) ([]byte, error) {
	if !bytes.Contains(raw, []byte(`"params"`)) {
		return raw, nil
	}
	members, err := jsonobj.Split(raw)
	if err != nil {
		return raw, nil //nolint:nilerr // not one JSON object, or a repeated key: the gateway refuses it
	}
	at := slices.IndexFunc(members, func(m jsonobj.Member) bool { return m.Key == "params" })
	if at < 0 {
		return raw, nil
	}
	tree, err := judge.DecodeJSON(members[at].Value) // a repeated name is refused, as protojson does
	ps, ok := tree.(map[string]any)
	if err != nil || !ok {
		return raw, nil //nolint:nilerr // not an object of params: the gateway refuses it with its own message
	}
	rewrite := false
	texts := make(map[string]string, len(ps))
	for _, name := range slices.Sorted(maps.Keys(ps)) {
		v := ps[name]
		if _, isString := v.(string); !isString {
			rewrite = true
		}
		text, ok := ParamText(v)
		if !ok {
			return nil, paramRefusal(name, v)
		}
		texts[name] = text
	}
	if !rewrite {
		return raw, nil
	}
	enc, err := json.Marshal(texts)
	if err != nil {
		return raw, nil //nolint:nilerr // cannot happen for a map of strings; the gateway then reads the body as sent
	}
	members[at].Value = enc
	var out bytes.Buffer
	out.Grow(len(raw))
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(m.Value)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func paramRefusal(name string, v any) error {
	path := "params." + clip(name)
	msg := fmt.Sprintf("a run parameter is one value: a string, a number (sent as its text as written) or true/false, not %s; send it as one of those", httpx.KindOf(v))
	st := status.New(codes.InvalidArgument, path+": "+msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: path, Description: msg}}}); err == nil {
		st = d
	}
	return st.Err()
}

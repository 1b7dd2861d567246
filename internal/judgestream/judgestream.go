// Package judgestream carries the records of a Judge request apart from
// the request itself, from the listener that received it (the gRPC codec
// or the HTTP route) to the service that judges it: the request is decoded
// without its records, and each record is decoded on its own, one at a
// time, so that the daemon never holds a tree of every record at once.
// The records stay sub-slices of the request's bytes, which the call holds
// anyway (and has reserved from the request budget).
package judgestream

import "context"

// Form is how the records are written.
type Form int

const (
	// Wire records are google.protobuf.Struct messages in protobuf's wire
	// form (the Judge RPC).
	Wire Form = iota
	// JSON records are JSON objects (POST /v1/judge).
	JSON
)

// Records are a Judge request's records by read: Reads[0] before,
// Reads[1] after.
type Records struct {
	Form  Form
	Reads [2][][]byte
}

// Of is the records of read i (0 before, 1 after); none for a nil r.
func (r *Records) Of(i int) [][]byte {
	if r == nil {
		return nil
	}
	return r.Reads[i]
}

type key struct{}

// With returns ctx carrying r.
func With(ctx context.Context, r *Records) context.Context {
	return context.WithValue(ctx, key{}, r)
}

// From is the records ctx carries, or nil.
func From(ctx context.Context) *Records {
	r, _ := ctx.Value(key{}).(*Records)
	return r
}

// Encoding is r's Form; Wire for a nil r.
func (r *Records) Encoding() Form {
	if r == nil {
		return Wire
	}
	return r.Form
}

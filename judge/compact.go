package judge

import "github.com/verifierd/verifierd/internal/compact"

// Batch is a read in compact form: field names interned once for the whole
// read and every record a run of fields over one document, so that a large
// read costs the garbage collector nothing to scan. DecodeRecordList and
// RecordStream build it; JudgeBatch judges it; Record turns one record back
// into the map form for evidence.
type Batch = compact.Batch

// RecordStream decodes records that arrive one JSON object at a time (an
// adapter's wire batches, a stored baseline) into one Batch as they
// arrive, optionally keeping of each only what a Projection says and
// digesting each whole (Digest). Index writes a stored baseline as an
// index (one entry per record, marked IndexWhole or IndexPartial) and
// AddEntry reads one back.
type RecordStream = compact.RecordStream

// SyntaxError is malformed JSON at a path of a document, with its byte
// offset: what DecodeRecordList and a RecordStream refuse.
type SyntaxError = compact.SyntaxError

// The marks of a stored baseline index's entries: a record kept whole (its
// bytes as they arrived) and a record kept in part (the fields its
// Projection keeps, in the record's order, each value its canonical text).
const (
	IndexWhole   byte = 'W'
	IndexPartial byte = 'P'
)

// NewRecordStream starts a read whose records are named path[i] in errors.
// records is the number of records expected (0 when unknown): the stream
// reserves room for that many once it has seen the first ones.
func NewRecordStream(path string, records int) *RecordStream {
	return compact.NewRecordStream(path, records)
}

// DecodeRecordList decodes records given one JSON object each (a wire or
// API read) into one batch. A part that is not one JSON object is refused
// with the path path[i].
func DecodeRecordList(parts [][]byte, path string) (*Batch, error) {
	return compact.DecodeRecordList(parts, path)
}

// BatchSnapshot is one read in compact form: reachable with its records, or
// unreachable with a reason.
type BatchSnapshot struct {
	Reachable bool
	Reason    string
	// Code is Snapshot.Code: for an unreachable read, the reason code to
	// report instead of SOR_UNREACHABLE / BASELINE_UNREACHABLE.
	Code  string
	Batch *Batch
}

// sels is a selector as the compact form matches it.
func sels(m []Pair) []compact.Sel {
	out := make([]compact.Sel, len(m))
	for i, p := range m {
		out[i] = compact.Sel{Field: p.Field, Value: p.Value, As: string(p.As)}
	}
	return out
}

// Record is one flat record read from a system of record: a JSON object.
// Values are string, json.Number (exact number text), float64, the Go integer
// types, bool, nil, map[string]any or []any. Keys are literal: "patient.id" is
// a key, not a path.
type Record = map[string]any

// Canon returns the canonical text of a record value (docs/contracts.md §2) and whether
// the value has one. A nil value (JSON null, or a missing field) has none: it
// matches no selector value and never confirms a read-back.
func Canon(v any) (string, bool) { return compact.Canon(v) }

// CanonicalJSON is the canonical JSON text of v (docs/contracts.md §2):
// object keys sorted, numbers and strings in their canonical form.
func CanonicalJSON(v any) string { return compact.CanonicalJSON(v) }

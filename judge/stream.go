package judge

import (
	"errors"
	"slices"
	"strings"
	"unsafe"
)

// RecordStream decodes records that arrive one JSON object at a time (an
// adapter's wire batches, a stored baseline) into one Batch as they arrive,
// without a map per record. Each record's bytes are copied once into the
// batch's document, so the caller's buffer may be reused at once; the
// batch's texts are spans of that document. The batch keeps where every
// record starts, so that Batch.Record gives a record exactly as its source
// bytes decode (numbers keep their source text), as the map path did.
type RecordStream struct {
	b     *Batch
	sc    Scanner
	buf   []byte
	path  string
	hint  int // expected records (0: unknown)
	sized bool
	err   error
}

// streamPresize is the number of records after which a stream with a
// record count hint sizes its document and fields for the whole read.
const streamPresize = 256

// NewRecordStream starts a read whose records are named path[i] in errors.
// records is the number of records expected (0 when unknown): the stream
// reserves room for that many once it has seen the first ones, so a large
// read is not copied again and again as it grows.
func NewRecordStream(path string, records int) *RecordStream {
	b := NewBatch()
	b.raw = []uint32{0}
	s := &RecordStream{b: b, path: path, hint: records}
	s.sc.use(b)
	b.doc = ""
	if records > 0 {
		n := min(records, streamPresize) + 1
		b.Ends = make([]uint32, 0, n)
		b.raw = append(make([]uint32, 0, n+1), 0)
	}
	return s
}

// Add decodes one record: exactly one JSON object. An error (a syntax
// error, a duplicate key, anything but one object) names the path, and the
// stream refuses every later record: the read is incomplete.
func (s *RecordStream) Add(rec []byte) error {
	if s.err != nil {
		return s.err
	}
	b, idx := s.b, len(s.b.Ends)
	if idx == streamPresize && s.hint > idx && !s.sized {
		s.presize()
	}
	start := len(s.buf)
	if uint64(start)+uint64(len(rec)) > 1<<32-1 {
		s.err = &SyntaxError{Path: recordPath(s.path, idx, ""), Msg: "the read is over 4 GiB"}
		return s.err
	}
	s.buf = append(s.buf, rec...)
	if len(s.buf) == 0 {
		s.err = &SyntaxError{Path: recordPath(s.path, idx, ""), Msg: "a record must be a JSON object"}
		return s.err
	}
	// The document so far. Appending later never changes these bytes
	// (only bytes past them, or a copy), so spans of it stay valid; field
	// offsets are offsets, valid in whichever copy is the last.
	doc := unsafe.String(&s.buf[0], len(s.buf))
	b.doc, s.sc.s, s.sc.pos, s.sc.docOK, s.sc.cur = doc, doc, start, true, b
	err := s.record(idx)
	if err != nil {
		if se, ok := errors.AsType[*SyntaxError](err); ok {
			se.Offset -= start
		}
		s.err = err
		return err
	}
	b.raw = append(b.raw, uint32(len(s.buf)))
	return nil
}

func (s *RecordStream) record(idx int) error {
	sc := &s.sc
	if sc.Peek() != '{' {
		return sc.fail(recordPath(s.path, idx, ""), sc.pos, "a record must be a JSON object")
	}
	if err := sc.record(s.b, s.path, idx); err != nil {
		return err
	}
	if sc.pos = skipWS(sc.s, sc.pos); sc.pos < len(sc.s) {
		return sc.fail(recordPath(s.path, idx, ""), sc.pos, "unexpected data after the record")
	}
	return nil
}

// presize reserves room for the expected records at the size of the first
// ones (a little more). Room reserved and never written is not touched.
func (s *RecordStream) presize() {
	s.sized = true
	b, n := s.b, len(s.b.Ends)
	per := (len(s.buf) + n - 1) / n
	fieldsPer := (len(b.Fields) + n - 1) / n
	want := s.hint + s.hint/16 + 16
	// Later records may be longer than the first (growing identities):
	// a quarter more room, since outgrowing it would copy the whole
	// document while both copies are held.
	if need := want*per + want*per/4; need > cap(s.buf) && need < 1<<32 {
		s.buf = append(make([]byte, 0, need), s.buf...)
	}
	if need := want * fieldsPer; need > cap(b.Fields) {
		b.Fields = append(make([]Field, 0, need), b.Fields...)
	}
	if want > cap(b.Ends) {
		b.Ends = append(make([]uint32, 0, want), b.Ends...)
		b.raw = append(make([]uint32, 0, want+1), b.raw...)
	}
}

// Len is the number of records decoded.
func (s *RecordStream) Len() int { return len(s.b.Ends) }

// Bytes is the size of the records decoded, in bytes of their JSON.
func (s *RecordStream) Bytes() int { return len(s.buf) }

// Batch returns the records decoded so far.
func (s *RecordStream) Batch() *Batch { return s.b }

// Source returns record i's bytes as they arrived, when the batch keeps
// them (a batch built by a RecordStream).
func (b *Batch) Source(i int) (string, bool) {
	if b == nil || len(b.raw) != len(b.Ends)+1 || i < 0 || i >= len(b.Ends) {
		return "", false
	}
	return b.doc[b.raw[i]:b.raw[i+1]], true
}

// CanonicalRecord returns the canonical JSON of record i: the same text
// CanonicalJSON gives for its map form.
func (b *Batch) CanonicalRecord(i int) string { return b.canonicalRecord(b.At(i)) }

// Canonicaliser writes a batch's records as canonical JSON into a buffer
// the caller reuses: the text CanonicalRecord returns, without a string
// per record. A read's digest covers every record this way.
type Canonicaliser struct {
	b     *Batch
	rank  []uint32 // per name index: its place in sorted order
	order []int
	sb    strings.Builder
}

// Canonicaliser returns a Canonicaliser for b, whose names must not grow
// while it is used.
func (b *Batch) Canonicaliser() *Canonicaliser {
	idx := make([]int, len(b.Names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return strings.Compare(b.Names[x], b.Names[y]) })
	rank := make([]uint32, len(b.Names))
	for r, i := range idx {
		rank[i] = uint32(r)
	}
	return &Canonicaliser{b: b, rank: rank}
}

// Append appends record i's canonical JSON to dst.
func (c *Canonicaliser) Append(dst []byte, i int) []byte {
	b, rec := c.b, c.b.At(i)
	c.order = c.order[:0]
	for k := range rec {
		c.order = append(c.order, k)
	}
	order, rank := c.order, c.rank
	for x := 1; x < len(order); x++ {
		for y := x; y > 0 && rank[rec[order[y]].Name] < rank[rec[order[y-1]].Name]; y-- {
			order[y], order[y-1] = order[y-1], order[y]
		}
	}
	dst = append(dst, '{')
	for n, k := range order {
		if n > 0 {
			dst = append(dst, ',')
		}
		f := &rec[k]
		dst = c.appendString(dst, b.Names[f.Name])
		dst = append(dst, ':')
		switch f.Kind {
		case KindNull:
			dst = append(dst, "null"...)
		case KindString:
			dst = c.appendString(dst, b.Text(f))
		default:
			dst = append(dst, b.Text(f)...)
		}
	}
	return append(dst, '}')
}

// appendString appends s as writeCanonString writes it.
func (c *Canonicaliser) appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if ch := s[i]; ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\' {
			c.sb.Reset()
			writeCanonString(&c.sb, s)
			return append(dst, c.sb.String()...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

package compact

import (
	"errors"
	"io"
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
	in    int // bytes of the records as they arrived

	pj    *projector     // set by Project
	dig   io.Writer      // set by Digest
	canon *Canonicaliser // the records' canonical JSON for dig
	line  []byte
	ix    *Indexer // set by Index
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
		b.ends = make([]uint32, 0, n)
		b.raw = append(make([]uint32, 0, n+1), 0)
	}
	return s
}

// Project makes the stream keep of each record only what p says a
// judgement reads (see Projection); the batch remembers p, and JudgeBatch
// judges with it only the contracts p was made for. Call it before the
// first Add; a nil p keeps every record whole.
func (s *RecordStream) Project(p *Projection) {
	if p == nil || len(s.b.ends) > 0 {
		return
	}
	s.b.proj, s.pj = p, &projector{p: p}
}

// Digest makes the stream write each record's canonical JSON (the text
// CanonicalJSON gives for its map form) and a newline to w as the record
// arrives, before a projection drops anything: a read's digest covers
// every record whole. Call it before the first Add.
func (s *RecordStream) Digest(w io.Writer) {
	if len(s.b.ends) > 0 {
		return
	}
	s.dig, s.canon = w, &Canonicaliser{b: s.b}
}

// Add decodes one record: exactly one JSON object. An error (a syntax
// error, a duplicate key, anything but one object) names the path, and the
// stream refuses every later record: the read is incomplete.
func (s *RecordStream) Add(rec []byte) error {
	if s.err != nil {
		return s.err
	}
	b, idx := s.b, len(s.b.ends)
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
	// offsets are offsets, valid in whichever copy is the last. Only a
	// projected record's own bytes are rewritten (project), after its
	// fields were moved out of the way.
	doc := unsafe.String(&s.buf[0], len(s.buf))
	b.doc, s.sc.s, s.sc.pos, s.sc.docOK, s.sc.cur = doc, doc, start, true, b
	f0, o0, n0 := len(b.fields), len(b.owned), len(b.names)
	err := s.record(idx)
	if err != nil {
		if se, ok := errors.AsType[*SyntaxError](err); ok {
			se.Offset -= start
		}
		s.err = err
		return err
	}
	s.in += len(rec)
	// A name first seen here is a span of this record's bytes: it gets
	// its own copy, so that it pins no old document and survives a
	// projection rewriting those bytes.
	for i := n0; i < len(b.names); i++ {
		old := b.names[i]
		name := strings.Clone(old)
		delete(b.index, old)
		b.names[i], b.index[name] = name, uint32(i)
	}
	if s.dig != nil {
		s.line = append(s.canon.appendFields(s.line[:0], b.fields[f0:]), '\n')
		if _, err := s.dig.Write(s.line); err != nil {
			s.err = err
			return err
		}
	}
	if s.pj != nil {
		if how, keep := s.pj.keep(b, b.fields[f0:]); how != keepWhole {
			s.project(idx, start, f0, o0, keep)
		}
	}
	b.raw = append(b.raw, uint32(len(s.buf)))
	return nil
}

// project keeps of record idx, the last one, only the fields keep names
// (by name index): their texts move to the start of the record's bytes
// (spans only ever move down, so nothing is overwritten before it is
// moved), the rest of its bytes and its other owned texts are dropped.
func (s *RecordStream) project(idx, start, f0, o0 int, keep []bool) {
	b := s.b
	fs := b.fields[f0:]
	w, k, o := start, 0, o0
	for _, f := range fs {
		if !keep[f.Name] {
			continue
		}
		switch {
		case f.own:
			b.owned[o] = b.owned[f.off]
			f.off = uint32(o)
			o++
		case f.Kind == KindString || f.Kind == KindNumber:
			copy(s.buf[w:], s.buf[f.off:f.off+f.n])
			f.off = uint32(w)
			w += int(f.n)
		}
		fs[k] = f
		k++
	}
	clear(b.owned[o:])
	b.owned = b.owned[:o]
	b.fields = b.fields[:f0+k]
	b.ends[idx] = uint32(len(b.fields))
	s.buf = s.buf[:w]
	b.doc = unsafe.String(unsafe.SliceData(s.buf), len(s.buf))
	MarkPartial(b, idx)
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
	b, n := s.b, len(s.b.ends)
	per := (len(s.buf) + n - 1) / n
	fieldsPer := (len(b.fields) + n - 1) / n
	want := s.hint + s.hint/16 + 16
	// Later records may be longer than the first (growing identities):
	// a quarter more room, since outgrowing it would copy the whole
	// document while both copies are held.
	if need := want*per + want*per/4; need > cap(s.buf) && need < 1<<32 {
		s.buf = append(make([]byte, 0, need), s.buf...)
	}
	if need := want * fieldsPer; need > cap(b.fields) {
		b.fields = append(make([]Field, 0, need), b.fields...)
	}
	if want > cap(b.ends) {
		b.ends = append(make([]uint32, 0, want), b.ends...)
		b.raw = append(make([]uint32, 0, want+1), b.raw...)
	}
}

// Len is the number of records decoded.
func (s *RecordStream) Len() int { return len(s.b.ends) }

// Bytes is the size of the records decoded, in bytes of their JSON as
// they arrived (before any projection).
func Bytes(s *RecordStream) int { return s.in }

// Kept is the size of the records' bytes the batch holds.
func Kept(s *RecordStream) int { return len(s.buf) }

// Batch returns the records decoded so far.
func (s *RecordStream) Batch() *Batch { return s.b }

// Source returns record i's bytes as they arrived, when the batch keeps
// them (a batch built by a RecordStream).
func Source(b *Batch, i int) (string, bool) {
	if b == nil || len(b.raw) != len(b.ends)+1 || i < 0 || i >= len(b.ends) || Partial(b, i) {
		return "", false
	}
	return b.doc[b.raw[i]:b.raw[i+1]], true
}

// CanonicalRecord returns the canonical JSON of record i: the same text
// CanonicalJSON gives for its map form.
func CanonicalRecord(b *Batch, i int) string { return CanonicalFields(b, At(b, i)) }

// Canonicaliser writes a batch's records as canonical JSON into a buffer
// the caller reuses: the text CanonicalRecord returns, without a string
// per record. A read's digest covers every record this way.
type Canonicaliser struct {
	b     *Batch
	rank  []uint32 // per name index: its place in sorted order
	stale int      // records written since the names outgrew rank
	order []int
	sb    strings.Builder
}

// Canonicaliser returns a Canonicaliser for b. Names added to b later are
// ordered too (a stream's batch grows as it is written).
func NewCanonicaliser(b *Batch) *Canonicaliser {
	c := &Canonicaliser{b: b}
	c.refresh()
	return c
}

// refresh ranks the batch's names as they are now.
func (c *Canonicaliser) refresh() {
	b := c.b
	idx := make([]int, len(b.names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return strings.Compare(b.names[x], b.names[y]) })
	c.rank = make([]uint32, len(b.names))
	for r, i := range idx {
		c.rank[i] = uint32(r)
	}
	c.stale = 0
}

// Append appends record i's canonical JSON to dst.
func (c *Canonicaliser) Append(dst []byte, i int) []byte { return c.appendFields(dst, At(c.b, i)) }

// appendFields appends the canonical JSON of rec, a record of the batch.
func (c *Canonicaliser) appendFields(dst []byte, rec []Field) []byte {
	b := c.b
	if len(c.rank) != len(b.names) {
		// New names: ranked again once as many records were written as
		// there are names (a read whose names keep growing is not ranked
		// for every record), ordered by name until then.
		if c.stale++; c.stale > len(b.names) {
			c.refresh()
		}
	}
	c.order = c.order[:0]
	for k := range rec {
		c.order = append(c.order, k)
	}
	order, rank := c.order, c.rank
	if len(rank) == len(b.names) {
		for x := 1; x < len(order); x++ {
			for y := x; y > 0 && rank[rec[order[y]].Name] < rank[rec[order[y-1]].Name]; y-- {
				order[y], order[y-1] = order[y-1], order[y]
			}
		}
	} else {
		for x := 1; x < len(order); x++ {
			for y := x; y > 0 && b.names[rec[order[y]].Name] < b.names[rec[order[y-1]].Name]; y-- {
				order[y], order[y-1] = order[y-1], order[y]
			}
		}
	}
	dst = append(dst, '{')
	for n, k := range order {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = c.appendMember(dst, &rec[k])
	}
	return append(dst, '}')
}

// appendMember appends f, a field of the batch, as an object member: its
// name, a colon and its value as canonical JSON.
func (c *Canonicaliser) appendMember(dst []byte, f *Field) []byte {
	dst = c.appendString(dst, c.b.names[f.Name])
	dst = append(dst, ':')
	switch f.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindString:
		return c.appendString(dst, Text(c.b, f))
	}
	return append(dst, Text(c.b, f)...)
}

// appendString appends s as WriteCanonString writes it.
func (c *Canonicaliser) appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if ch := s[i]; ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\' {
			c.sb.Reset()
			WriteCanonString(&c.sb, s)
			return append(dst, c.sb.String()...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

package compact

import (
	"errors"
	"fmt"
	"io"
)

// A stored baseline index holds one entry per record of the read, in the
// order the adapter sent them: a mark, then a JSON object. A record kept
// whole (IndexWhole) is its bytes as they arrived; a record kept in part
// (IndexPartial) is the fields its Projection keeps, in the record's order,
// each value written from its canonical text. Reading the entries back
// (RecordStream.AddEntry under the same Projection) gives the batch a
// RecordStream projecting the records as they arrive gives, Partial marks
// included, without projecting or digesting anything again.
const (
	IndexWhole   byte = 'W'
	IndexPartial byte = 'P'
)

// Indexer turns the records of a read, one at a time as they arrive, into
// index entries: it digests each record whole (as RecordStream.Digest
// does), projects it, and forgets it, so that indexing a read holds one
// record at a time, never the read.
type Indexer struct {
	s      *RecordStream
	out    []byte
	failed error
	n      int
}

// NewIndexer indexes records under p, writing each record's canonical JSON
// and a newline to digest before anything of it is dropped.
func NewIndexer(p *Projection, digest io.Writer) *Indexer {
	s := NewRecordStream("records", 0)
	s.Digest(digest)
	s.Project(p)
	return &Indexer{s: s}
}

// Entry returns the index entry of rec, valid until the next call. A
// record that does not decode (and every record after it: the digest no
// longer covers the read) is kept whole as it arrived, so that reading the
// index back fails on it exactly as reading the record would; Err reports
// the first such failure.
func (x *Indexer) Entry(rec []byte) []byte {
	x.n++
	x.out = x.out[:0]
	if x.failed == nil {
		if err := x.s.Add(rec); err != nil {
			x.failed = fmt.Errorf("record %d: %w", x.n-1, err)
		} else {
			b := x.s.b
			if Partial(b, 0) {
				x.out = append(x.out, IndexPartial)
				x.out = x.s.canon.appendInOrder(x.out, At(b, 0))
			} else {
				x.out = append(append(x.out, IndexWhole), rec...)
			}
			x.s.reset()
			return x.out
		}
	}
	return append(append(x.out, IndexWhole), rec...)
}

// Err is the first record that did not decode, if any.
func (x *Indexer) Err() error { return x.failed }

// Len is the number of entries made.
func (x *Indexer) Len() int { return x.n }

// Index returns the index entry of rec, the next record of a read as it
// arrives, valid until the next call (Indexer.Entry), and keeps nothing of
// the record: indexing a read holds one record at a time. Call Digest and
// Project first: each record is digested whole, then projected. A stream
// either indexes a read or collects one (Add, AddEntry), never both.
func (s *RecordStream) Index(rec []byte) []byte {
	if s.ix == nil {
		s.ix = &Indexer{s: s}
	}
	return s.ix.Entry(rec)
}

// IndexErr is the first record Index could not decode, if any: that
// record and every later one were indexed whole, as they arrived, and the
// digest does not cover the read.
func (s *RecordStream) IndexErr() error {
	if s.ix == nil {
		return nil
	}
	return s.ix.failed
}

// reset forgets the records decoded (keeping the names seen, and their
// ranks), so that the next record is record 0 of an empty batch.
func (s *RecordStream) reset() {
	b := s.b
	b.fields = b.fields[:0]
	b.ends = b.ends[:0]
	b.raw = b.raw[:1]
	clear(b.owned)
	b.owned = b.owned[:0]
	b.part = b.part[:0]
	s.buf = s.buf[:0]
	b.doc = ""
}

// AddEntry decodes one entry of a stored index (IndexWhole, IndexPartial)
// made under the Projection the stream was given (Project): the record is
// neither projected nor digested again. An entry with another mark, or a
// stream with no Projection, is an error: the index is unreadable.
func (s *RecordStream) AddEntry(e []byte) error {
	if s.err != nil {
		return s.err
	}
	idx := len(s.b.ends)
	if s.pj == nil {
		s.err = errors.New("a baseline index is read under the projection it was made with")
		return s.err
	}
	if len(e) == 0 || (e[0] != IndexWhole && e[0] != IndexPartial) {
		s.err = &SyntaxError{Path: recordPath(s.path, idx, ""), Msg: "not an entry of a baseline index (no W or P mark)"}
		return s.err
	}
	pj, dig := s.pj, s.dig
	s.pj, s.dig = nil, nil
	err := s.Add(e[1:])
	s.pj, s.dig = pj, dig
	if err == nil && e[0] == IndexPartial {
		MarkPartial(s.b, idx)
	}
	return err
}

// appendInOrder appends rec, a record of the batch, as a JSON object with
// its fields in the record's order and each value its canonical text.
func (c *Canonicaliser) appendInOrder(dst []byte, rec []Field) []byte {
	dst = append(dst, '{')
	for k := range rec {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = c.appendMember(dst, &rec[k])
	}
	return append(dst, '}')
}

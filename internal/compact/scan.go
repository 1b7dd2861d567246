package compact

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// Scanner is the fast JSON reader of the case decoder: it walks one JSON
// document held as a string and decodes arrays of records straight into a
// Batch, without building a map per record. Field names are interned once
// per batch; string values without escapes are substrings of the document
// (no copy), numbers are kept as their canonical text. Everything it
// accepts, encoding/json accepts with the same values, and it refuses
// duplicate keys as DecodeJSON does; the fuzz test FuzzScanRecords holds it
// to that. Errors are *SyntaxError, naming the path and the byte offset.
type Scanner struct {
	s   string
	pos int

	cur    *Batch
	docOK  bool // cur's texts may be spans of s (cur.doc starts with s)
	copied bool // the last str or number made a new string
	shape  []uint32
	plain  []bool   // shape[k]'s name reads the same quoted (no escape) // the previous record's names, in order: the likely next ones
	seen   []uint32 // per name index: the stamp of the last record holding it
	stamp  uint32
	level  int // objects and arrays open around the position (Object, Records)
	arena  Arena
}

// SyntaxError is malformed JSON at a path of the document.
type SyntaxError struct {
	Path   string
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at byte %d (in %s)", e.Msg, e.Offset, cmp.Or(e.Path, "the document"))
}

// NewScanner reads the JSON document s.
func NewScanner(s string) *Scanner { return &Scanner{s: s} }

func (sc *Scanner) fail(path string, at int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Path: path, Offset: at, Msg: fmt.Sprintf(format, args...)}
}

func skipWS(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Peek returns the next non-space byte, or 0 at the end of the document.
func (sc *Scanner) Peek() byte {
	sc.pos = skipWS(sc.s, sc.pos)
	if sc.pos >= len(sc.s) {
		return 0
	}
	return sc.s[sc.pos]
}

// End checks that nothing but white space follows the document.
func (sc *Scanner) End() error {
	if sc.pos = skipWS(sc.s, sc.pos); sc.pos < len(sc.s) {
		return sc.fail("", sc.pos, "unexpected data after the JSON document")
	}
	return nil
}

// Object reads an object, calling fn for each member with the scanner at
// the member's value; fn must read the value. A duplicate key is refused.
func (sc *Scanner) Object(path string, fn func(key, path string) error) error {
	if sc.Peek() != '{' {
		return sc.fail(path, sc.pos, "expected an object")
	}
	sc.pos++
	sc.level++
	defer func() { sc.level-- }()
	var keys []string
	if sc.Peek() == '}' {
		sc.pos++
		return nil
	}
	for {
		if sc.Peek() != '"' {
			return sc.fail(path, sc.pos, "expected a member name in double quotes")
		}
		key, next, serr := sc.str(sc.pos)
		if serr != nil {
			serr.Path = path
			return serr
		}
		sc.pos = next
		if slices.Contains(keys, key) {
			return sc.fail(join(path, key), next, "duplicate key %q", key)
		}
		keys = append(keys, key)
		if sc.Peek() != ':' {
			return sc.fail(join(path, key), sc.pos, "expected ':' after the member name")
		}
		sc.pos++
		sc.Peek()
		if err := fn(key, join(path, key)); err != nil {
			return err
		}
		switch sc.Peek() {
		case ',':
			sc.pos++
		case '}':
			sc.pos++
			return nil
		default:
			return sc.fail(path, sc.pos, "expected ',' or '}' after an object member")
		}
	}
}

// SplitAt hands the document from the scanner's position up to end to a
// new scanner and moves this one to end, so that a large value can be
// decoded on another goroutine while this one reads on. The new scanner's
// End reports a value that does not end at end: a caller that guessed end
// learns so from an error. Texts the new scanner decodes are spans of the
// same document.
func (sc *Scanner) SplitAt(end int) *Scanner {
	sub := &Scanner{s: sc.s[:end], pos: sc.pos, level: sc.level, arena: sc.arena}
	sc.pos = end
	return sub
}

// Pos is the scanner's byte offset in the document.
func (sc *Scanner) Pos() int { return sc.pos }

// Value reads any value into the tree DecodeJSON returns.
func (sc *Scanner) Value(path string) (any, error) {
	start := skipWS(sc.s, sc.pos)
	end, err := sc.skip(start, path)
	if err != nil {
		return nil, err
	}
	if err := deepAt(sc.s[start:end], path, start, MaxDepth-sc.level); err != nil {
		return nil, err
	}
	v, derr := DecodeJSON([]byte(sc.s[start:end]))
	if derr != nil {
		return nil, sc.fail(path, start, "%v", derr)
	}
	sc.pos = end
	return v, nil
}

// deepAt refuses a value (starting at byte at of the document) nested more
// than limit levels, naming the path inside it where the limit is passed
// and its byte offset in the document.
func deepAt(value, path string, at, limit int) error {
	if ne, deep := errors.AsType[*jsondepth.Error](jsondepth.CheckJSON(value, path, limit)); deep {
		return &SyntaxError{Path: ne.Path, Offset: at + ne.Offset,
			Msg: fmt.Sprintf("nested more than %d levels of objects and arrays; flatten the value", MaxDepth)}
	}
	return nil
}

// skip finds the end of the value starting at i. It checks only what it
// needs to find the end; the caller validates the span.
func (sc *Scanner) skip(i int, path string) (int, error) {
	s := sc.s
	depth := 0
	for i < len(s) {
		switch c := s[i]; c {
		case '"':
			j := closingQuote(s, i)
			if j >= len(s) {
				return 0, sc.fail(path, i, "unterminated string")
			}
			i = j + 1
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, nil
			}
			depth--
			i++
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i, nil
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(s) {
			switch s[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
				return i, nil
			}
		}
	}
	if depth > 0 {
		return 0, sc.fail(path, i, "unexpected end of JSON input")
	}
	return i, nil
}

// str reads the string starting at the quote at i. Without escapes it is a
// substring of the document.
func (sc *Scanner) str(i int) (string, int, *SyntaxError) {
	s := sc.s
	ascii := true
	j := i + 1
	for {
		for j < len(s) && plainStrByte[s[j]] {
			j++
		}
		if j >= len(s) {
			return "", 0, sc.fail("", i, "unterminated string")
		}
		switch c := s[j]; {
		case c == '"':
			out := s[i+1 : j]
			if !ascii && !utf8.ValidString(out) {
				return sc.slowStr(i)
			}
			sc.copied = false
			return out, j + 1, nil
		case c == '\\':
			return sc.slowStr(i)
		case c < 0x20:
			return "", 0, sc.fail("", j, "control character 0x%02x in a string; escape it", c)
		default: // the start of a UTF-8 sequence, checked at the end
			ascii = false
			j++
		}
	}
}

// plainStrByte marks the bytes a string can hold as they are: printable
// ASCII other than the quote and the backslash.
var plainStrByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// closingQuote returns the index of the quote that closes the string
// opened at s[i], stepping over escapes, or a value >= len(s) when the
// string is not closed.
func closingQuote(s string, i int) int {
	j := i + 1
	for j < len(s) && s[j] != '"' {
		if s[j] == '\\' {
			j++
		}
		j++
	}
	return j
}

// slowStr unquotes a string with escapes or invalid UTF-8 exactly as
// encoding/json does.
func (sc *Scanner) slowStr(i int) (string, int, *SyntaxError) {
	s := sc.s
	j := closingQuote(s, i)
	if j >= len(s) {
		return "", 0, sc.fail("", i, "unterminated string")
	}
	var out string
	if err := json.Unmarshal([]byte(s[i:j+1]), &out); err != nil {
		return "", 0, sc.fail("", i, "bad string: %v", err)
	}
	sc.copied = true
	return out, j + 1, nil
}

// number reads the number starting at i and returns its canonical text.
func (sc *Scanner) number(i int) (string, int, *SyntaxError) {
	n, err := jsonnum.Scan(sc.s, i)
	if err != nil {
		return "", 0, sc.fail("", i, "%v", err)
	}
	text := sc.s[i:n.End]
	// An integer as Scan reads it has no leading zero, so it is plain
	// (IsPlainInteger) unless it is "-0" or has too many digits.
	if n.Integer() && text != "-0" && len(strings.TrimPrefix(text, "-")) <= PlainIntegerDigits {
		sc.copied = false
		return text, n.End, nil
	}
	sc.copied = true
	return canonScanned(sc.s, n), n.End, nil
}

// Records reads an array into b: each object element becomes one record.
// It returns the number of elements and the index of the first element that
// is not an object (-1 when all are), which is skipped.
func (sc *Scanner) Records(path string, b *Batch) (n, firstBad int, err error) {
	firstBad = -1
	if sc.Peek() != '[' {
		return 0, -1, sc.fail(path, sc.pos, "expected a list of records")
	}
	if sc.cur != b {
		sc.use(b)
	}
	sc.pos++
	sc.level++
	defer func() { sc.level-- }()
	if sc.Peek() == ']' {
		sc.pos++
		return 0, -1, nil
	}
	start, fields0 := sc.pos, len(b.fields)
	for {
		if n == presizeAfter {
			sc.presize(b, start, fields0, n)
		}
		if sc.Peek() == '{' {
			if err := sc.record(b, path, n); err != nil {
				return n, firstBad, err
			}
		} else {
			p := fmt.Sprintf("%s[%d]", path, n)
			if _, err := sc.Value(p); err != nil {
				return n, firstBad, err
			}
			if firstBad < 0 {
				firstBad = n
			}
		}
		n++
		switch sc.Peek() {
		case ',':
			sc.pos++
		case ']':
			sc.pos++
			return n, firstBad, nil
		default:
			return n, firstBad, sc.fail(fmt.Sprintf("%s[%d]", path, n-1), sc.pos, "expected ',' or ']' after a record")
		}
	}
}

// use makes b the batch records go into. An empty batch takes the
// document as its own, so that texts are spans of it; otherwise every text
// is kept as a string of its own.
func (sc *Scanner) use(b *Batch) {
	sc.cur, sc.shape, sc.plain, sc.seen = b, sc.shape[:0], sc.plain[:0], sc.seen[:0]
	for range b.names {
		sc.seen = append(sc.seen, 0)
	}
	if len(b.fields) == 0 && b.doc == "" {
		b.doc = sc.s
	}
	sc.docOK = b.doc == sc.s
}

// plainName reports whether name, quoted, is written as it is: no
// character in it needs an escape.
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// rawKey reports whether the document holds, at the quote at i, exactly
// the quoted name (which has no escape and no quote in it).
func (sc *Scanner) rawKey(i int, name string) bool {
	end := i + 1 + len(name)
	return end < len(sc.s) && sc.s[end] == '"' && sc.s[i+1:end] == name
}

// Arena provides the memory of a large batch's fields: it returns a
// slice of at least size bytes, or a shorter one (nil) to decline, and
// must never hand out the same memory twice. A one-shot process (verifyctl
// judge) can hand out memory the garbage collector never sees, in huge
// pages; a Field holds no pointer, so that is safe. Memory it hands out is
// never given back.
type Arena func(size int) []byte

// SetArena makes the batches this scanner fills take a large read's
// fields from a (nil: the Go heap). Call it before Records.
func (sc *Scanner) SetArena(a Arena) { sc.arena = a }

// fieldsFrom returns an empty slice with room for n fields from a, or nil
// when a declines (or hands out memory a Field cannot sit in).
func fieldsFrom(a Arena, n int) []Field {
	size := n * int(unsafe.Sizeof(Field{}))
	mem := a(size)
	if len(mem) < size || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%unsafe.Alignof(Field{}) != 0 {
		return nil
	}
	return unsafe.Slice((*Field)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0]
}

// presizeAfter is the number of records after which Records sizes the
// batch for the rest of the document.
const presizeAfter = 256

// presize reserves room for as many more records as the rest of the
// document could hold at the size of the first ones, so that a large read
// is not copied again and again as it grows. The guess errs high (the rest
// of the document may hold more than this array); memory reserved and never
// written is not touched.
func (sc *Scanner) presize(b *Batch, start, fields0, n int) {
	perRecord := max((sc.pos-start)/n, 1)
	more := (len(sc.s) - sc.pos) / perRecord
	fieldsPer := (len(b.fields) - fields0 + n - 1) / n
	if need := len(b.fields) + more*fieldsPer; need > cap(b.fields) {
		var buf []Field
		if sc.arena != nil && need >= 1<<16 {
			buf = fieldsFrom(sc.arena, need)
		}
		if cap(buf) < need {
			buf = make([]Field, 0, need)
		}
		b.fields = append(buf[:0], b.fields...)
	}
	if need := len(b.ends) + more; need > cap(b.ends) {
		b.ends = append(make([]uint32, 0, need), b.ends...)
	}
}

// DecodeRecords decodes a JSON array of records into a new batch. A
// non-object element is refused with its path.
func DecodeRecords(data, path string) (*Batch, error) {
	b := NewBatch()
	sc := NewScanner(data)
	_, bad, err := sc.Records(path, b)
	if err != nil {
		return nil, err
	}
	if err := sc.End(); err != nil {
		return nil, err
	}
	if bad >= 0 {
		return nil, &SyntaxError{Path: fmt.Sprintf("%s[%d]", path, bad), Msg: "a record must be a JSON object"}
	}
	return b, nil
}

// DecodeRecord decodes one JSON object into b as its next record. On an
// error b is left as it was.
func DecodeRecord(data string, path string, b *Batch) error {
	sc := NewScanner(data)
	if sc.Peek() != '{' {
		return sc.fail(path, sc.pos, "a record must be a JSON object")
	}
	sc.use(b)
	fields, ends, owned := len(b.fields), len(b.ends), len(b.owned)
	err := sc.record(b, path, -1)
	if err == nil {
		err = sc.End()
	}
	if err != nil {
		b.fields, b.ends, b.owned = b.fields[:fields], b.ends[:ends], b.owned[:owned]
	}
	return err
}

// DecodeRecordList decodes records given one JSON object each (a wire or
// API read) into one batch. The parts are copied once into one document,
// so that the batch's texts are spans of it. A part that is not one JSON
// object is refused with the path path[i].
func DecodeRecordList(parts [][]byte, path string) (*Batch, error) {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, p := range parts {
		sb.Write(p)
	}
	doc := sb.String()
	b := NewBatch()
	sc := &Scanner{s: doc}
	sc.use(b)
	start := 0
	for i, p := range parts {
		end := start + len(p)
		sc.s, sc.pos = doc[:end], start
		p := fmt.Sprintf("%s[%d]", path, i)
		if sc.Peek() != '{' {
			return nil, sc.fail(p, sc.pos, "a record must be a JSON object")
		}
		if err := sc.record(b, p, -1); err != nil {
			return nil, err
		}
		if sc.pos = skipWS(sc.s, sc.pos); sc.pos < end {
			return nil, sc.fail(p, sc.pos, "unexpected data after the record")
		}
		start = end
	}
	return b, nil
}

func recordPath(path string, idx int, key string) string {
	p := path
	if idx >= 0 {
		p = fmt.Sprintf("%s[%d]", path, idx)
	}
	if key != "" {
		p = join(p, key)
	}
	return p
}

// newName reads the field name at i, one that is not the previous
// record's k-th written plainly: it unquotes and interns it and notes it as
// the shape's k-th. It returns the name, its text and where the name ends.
// Kept out of record, whose loop reads the common case (the same names in
// the same order) without it.
func (sc *Scanner) newName(b *Batch, i, k int) (uint32, string, int, *SyntaxError) {
	key, j, serr := sc.str(i)
	if serr != nil {
		return 0, "", j, serr
	}
	name := b.intern(key)
	plain := plainName(key)
	if k < len(sc.shape) {
		sc.shape[k], sc.plain[k] = name, plain
	} else {
		sc.shape, sc.plain = append(sc.shape, name), append(sc.plain, plain)
	}
	return name, key, j, nil
}

// nested reads the object or array at i (the value of the field at path)
// into f as its canonical JSON, and returns where the value ends.
func (sc *Scanner) nested(b *Batch, f *Field, i int, path string) (int, error) {
	s := sc.s
	end, serr := sc.skip(i, path)
	if serr != nil {
		return i, serr
	}
	// The record is a level itself, inside sc.level others.
	if err := deepAt(s[i:end], path, i, MaxDepth-1-sc.level); err != nil {
		return i, err
	}
	v, derr := DecodeJSON([]byte(s[i:end]))
	if derr != nil {
		return i, sc.fail(path, i, "%v", derr)
	}
	f.Kind = KindObject
	if s[i] == '[' {
		f.Kind = KindArray
	}
	b.setOwned(f, CanonicalJSON(v))
	return end, nil
}

// record reads one object (the scanner is at its '{') as the next record.
func (sc *Scanner) record(b *Batch, path string, idx int) error {
	s := sc.s
	i := sc.pos + 1
	sc.nextStamp()
	k := 0
	i = skipWS(s, i)
	if i < len(s) && s[i] == '}' {
		sc.endRecord(b, i)
		return nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return sc.fail(recordPath(path, idx, ""), i, "expected a field name in double quotes")
		}
		var name uint32
		var key string
		if k < len(sc.shape) && sc.plain[k] && sc.rawKey(i, b.names[sc.shape[k]]) {
			// The name the previous record had here, written plainly:
			// no need to unquote it.
			name, key = sc.shape[k], b.names[sc.shape[k]]
			i += len(key) + 2
		} else {
			var serr *SyntaxError
			if name, key, i, serr = sc.newName(b, i, k); serr != nil {
				serr.Path = recordPath(path, idx, "")
				return serr
			}
		}
		for int(name) >= len(sc.seen) {
			sc.seen = append(sc.seen, 0)
		}
		if sc.seen[name] == sc.stamp {
			return sc.fail(recordPath(path, idx, key), i, "duplicate key %q", key)
		}
		sc.seen[name] = sc.stamp
		i = skipWS(s, i)
		if i >= len(s) || s[i] != ':' {
			return sc.fail(recordPath(path, idx, key), i, "expected ':' after the field name")
		}
		i = skipWS(s, i+1)
		f := Field{Name: name}
		var verr *SyntaxError
		if i >= len(s) {
			return sc.fail(recordPath(path, idx, key), i, "unexpected end of JSON input")
		}
		switch c := s[i]; {
		case c == '"' || c == '-' || (c >= '0' && c <= '9'):
			var text string
			start := i
			if c == '"' {
				f.Kind = KindString
				text, i, verr = sc.str(i)
				start++
			} else {
				f.Kind = KindNumber
				text, i, verr = sc.number(i)
			}
			if verr == nil {
				if sc.copied || !sc.docOK {
					b.setOwned(&f, text)
				} else {
					f.off, f.n = uint32(start), uint32(len(text))
				}
			}
		case c == 't' && strings.HasPrefix(s[i:], "true"):
			f = boolField(name, true)
			i += 4
		case c == 'f' && strings.HasPrefix(s[i:], "false"):
			f = boolField(name, false)
			i += 5
		case c == 'n' && strings.HasPrefix(s[i:], "null"):
			i += 4
		case c == '{' || c == '[':
			var err error
			if i, err = sc.nested(b, &f, i, recordPath(path, idx, key)); err != nil {
				return err
			}
		default:
			return sc.fail(recordPath(path, idx, key), i, "invalid value")
		}
		if verr != nil {
			verr.Path = recordPath(path, idx, key)
			return verr
		}
		b.fields = append(b.fields, f)
		k++
		i = skipWS(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipWS(s, i+1)
			continue
		}
		if i < len(s) && s[i] == '}' {
			sc.endRecord(b, i)
			return nil
		}
		return sc.fail(recordPath(path, idx, key), i, "expected ',' or '}' after a field")
	}
}

// nextStamp starts a record's duplicate-key check: a new stamp, and on
// wrapping around, every stamp forgotten.
func (sc *Scanner) nextStamp() {
	sc.stamp++
	if sc.stamp == 0 {
		clear(sc.seen)
		sc.stamp = 1
	}
}

// endRecord closes the record whose '}' is at i.
func (sc *Scanner) endRecord(b *Batch, i int) {
	sc.pos = i + 1
	b.ends = append(b.ends, uint32(len(b.fields)))
}

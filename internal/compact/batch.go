package compact

import (
	"encoding/json"
	"strings"
)

// ValueKind is the JSON kind of a record value in compact form.
type ValueKind uint8

// Kinds. KindNull is a value with no canonical text (docs/contracts.md §2).
const (
	KindNull ValueKind = iota
	KindString
	KindNumber
	KindBool
	KindObject
	KindArray
)

// Field is one field of a record in compact form: the index of its name in
// the batch's names (Name) and its value as canonical text (docs/contracts.md §2, read with
// Text) with its JSON kind. A null value has Kind KindNull and no
// text; an object or array value is its canonical JSON. A Field holds no
// pointer: its text is a span of the batch's document or one of the
// batch's own strings, so a large batch costs the garbage collector nothing
// to scan.
type Field struct {
	Name uint32
	off  uint32 // start in the document, or index in owned
	n    uint32 // length in the document; for a boolean 1 means true
	Kind ValueKind
	own  bool
}

// Batch is a read in compact form: field names interned once for the whole
// batch, and every record a run of Fields. Record i is
// fields[ends[i-1]:ends[i]] (At). A Batch is what the fast case decoder
// builds and what JudgeBatch judges; Record turns one record back into the
// map form for evidence. Its fields are unexported: judge.Batch is an alias
// of it, and every exported field would be judge's promise.
type Batch struct {
	names  []string // by index: a Field's Name
	fields []Field
	ends   []uint32

	doc   string   // the document the decoder read; texts are spans of it
	owned []string // texts that are not spans of doc (unescaped, canonicalised)
	index map[string]uint32
	// raw, when a RecordStream built the batch, is where each record's
	// source bytes start in doc, and then the end of the last one.
	raw []uint32
	// proj is the Projection the batch was read under (nil: records are
	// whole); part marks, one bit a record, the records it projected.
	proj *Projection
	part []uint64
}

// Text returns the canonical text of f, a field of this batch.
func Text(b *Batch, f *Field) string {
	switch {
	case f.Kind == KindBool:
		if f.n == 1 {
			return "true"
		}
		return "false"
	case f.own:
		return b.owned[f.off]
	}
	return b.doc[f.off : f.off+f.n]
}

// setOwned gives f the text s, kept by the batch.
func (b *Batch) setOwned(f *Field, s string) {
	f.own, f.off, f.n = true, uint32(len(b.owned)), uint32(len(s))
	b.owned = append(b.owned, s)
}

func boolField(name uint32, v bool) Field {
	f := Field{Name: name, Kind: KindBool}
	if v {
		f.n = 1
	}
	return f
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{index: map[string]uint32{}} }

// Name is the field name whose index is n (a Field's Name).
func Name(b *Batch, n uint32) string { return b.names[n] }

// FieldCount is the number of fields of every record of b together.
func FieldCount(b *Batch) int { return len(b.fields) }

// Len is the number of records.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.ends)
}

// At returns record i's fields.
func At(b *Batch, i int) []Field {
	start := uint32(0)
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.fields[start:b.ends[i]]
}

// intern returns the index of name, adding it when new.
func (b *Batch) intern(name string) uint32 {
	if b.index == nil {
		b.index = make(map[string]uint32, len(b.names))
		for i, n := range b.names {
			b.index[n] = uint32(i)
		}
	}
	if i, ok := b.index[name]; ok {
		return i
	}
	i := uint32(len(b.names))
	b.names = append(b.names, name)
	b.index[name] = i
	return i
}

// NameIndex returns the index of name, or -1 when no record has it.
func NameIndex(b *Batch, name string) int64 {
	if b == nil {
		return -1
	}
	if b.index == nil {
		// A batch not built by NewBatch: look, without changing it, so that
		// concurrent judgements of one batch stay read-only.
		for i, n := range b.names {
			if n == name {
				return int64(i)
			}
		}
		return -1
	}
	if i, ok := b.index[name]; ok {
		return int64(i)
	}
	return -1
}

// Append adds one record given as a map (the session path's form). Values
// are turned into canonical text exactly as Canon does.
func Append(b *Batch, r Record) {
	for k, v := range r {
		f := Field{Name: b.intern(k)}
		switch x := v.(type) {
		case nil:
		case string:
			f.Kind = KindString
			b.setOwned(&f, x)
		case bool:
			f = boolField(f.Name, x)
		case map[string]any:
			f.Kind = KindObject
			b.setOwned(&f, CanonicalJSON(x))
		case []any:
			f.Kind = KindArray
			b.setOwned(&f, CanonicalJSON(x))
		default:
			if t, ok := Canon(x); ok {
				f.Kind = KindNumber
				b.setOwned(&f, t)
			}
		}
		b.fields = append(b.fields, f)
	}
	b.ends = append(b.ends, uint32(len(b.fields)))
}

// Record returns record i in map form: strings as string, numbers as
// json.Number of their canonical text, booleans, nil, and objects and arrays
// decoded from their canonical JSON. A batch that keeps its records' source
// bytes (built by a RecordStream) decodes them instead: numbers keep the
// text the source gave them. A projected record (Partial) gives only the
// fields its read kept.
func (b *Batch) Record(i int) Record {
	if src, ok := Source(b, i); ok {
		if r, ok := b.sourceRecord(i); ok {
			return r
		}
		if v, err := DecodeJSON([]byte(src)); err == nil {
			if r, ok := v.(map[string]any); ok {
				return r
			}
		}
	}
	fs := At(b, i)
	r := make(Record, len(fs))
	for i := range fs {
		r[b.names[fs[i].Name]] = b.value(&fs[i])
	}
	return r
}

// sourceRecord is record i in map form straight from its fields, when
// that is the map decoding its source gives: every value a string, a
// boolean, a null or a number whose text is the source's own (a span of
// it, not a canonicalised copy). Any other record (an object or array
// value, a number written otherwise than canonically) is left to the
// decoder.
func (b *Batch) sourceRecord(i int) (Record, bool) {
	fs := At(b, i)
	for k := range fs {
		switch f := &fs[k]; f.Kind {
		case KindObject, KindArray:
			return nil, false
		case KindNumber:
			if f.own {
				return nil, false
			}
		}
	}
	// Texts are copied: evidence must not pin the read's whole document.
	r := make(Record, len(fs))
	for k := range fs {
		f := &fs[k]
		var v any
		switch f.Kind {
		case KindString:
			v = strings.Clone(Text(b, f))
		case KindNumber:
			v = json.Number(strings.Clone(Text(b, f)))
		case KindBool:
			v = f.n == 1
		}
		r[b.names[f.Name]] = v
	}
	return r, true
}

func (b *Batch) value(f *Field) any {
	switch f.Kind {
	case KindString:
		return Text(b, f)
	case KindNumber:
		return json.Number(Text(b, f))
	case KindBool:
		return f.n == 1
	case KindObject, KindArray:
		v, err := DecodeJSON([]byte(Text(b, f)))
		if err != nil {
			// Canonical JSON always decodes; keep the text rather than lose it.
			return Text(b, f)
		}
		return v
	}
	return nil
}

// Get returns the canonical text of the field named name in rec, and
// whether it has one (present and not null).
func Get(b *Batch, rec []Field, name int64) (string, bool) {
	if name < 0 {
		return "", false
	}
	n := uint32(name)
	for i := range rec {
		if rec[i].Name == n {
			if rec[i].Kind == KindNull {
				return "", false
			}
			return Text(b, &rec[i]), true
		}
	}
	return "", false
}

// CanonicalFields returns the canonical JSON of a compact record: the same
// text CanonicalJSON gives for its map form.
func CanonicalFields(b *Batch, rec []Field) string {
	order := make([]int, len(rec))
	for i := range order {
		order[i] = i
	}
	// Insertion sort by name: records are small.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && b.names[rec[order[j]].Name] < b.names[rec[order[j-1]].Name]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var sb strings.Builder
	sb.WriteByte('{')
	for n, i := range order {
		if n > 0 {
			sb.WriteByte(',')
		}
		WriteCanonString(&sb, b.names[rec[i].Name])
		sb.WriteByte(':')
		switch rec[i].Kind {
		case KindNull:
			sb.WriteString("null")
		case KindString:
			WriteCanonString(&sb, Text(b, &rec[i]))
		default:
			sb.WriteString(Text(b, &rec[i]))
		}
	}
	sb.WriteByte('}')
	return sb.String()
}

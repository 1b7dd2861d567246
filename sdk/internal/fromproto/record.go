package fromproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// Record decodes one record. It must be exactly one JSON object; numbers
// decode as json.Number so that their text stays exact.
//
// A baseline can hold millions of records, so flat objects of plain
// strings, numbers, booleans and null are parsed directly; a record with a
// nested value or an escaped string goes through encoding/json, which also
// produces every error message. Both paths give the same result.
func Record(b []byte) (sdk.Record, error) {
	if r, ok := flatRecord(b); ok {
		return r, nil
	}
	return slowRecord(b)
}

func slowRecord(b []byte) (sdk.Record, error) {
	// A plugin's record nests at most jsondepth.Max levels, the record
	// itself being the first; deeper is refused before decoding.
	if err := jsondepth.CheckJSON(b, "", jsondepth.Max); err != nil {
		return nil, fmt.Errorf("record is refused: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var r sdk.Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("record is not a JSON object: %w", err)
	}
	if r == nil {
		return nil, errors.New("record is JSON null, not an object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("record has data after its JSON object")
	}
	return r, nil
}

// flatRecord parses the common case; ok is false whenever it meets anything
// it does not handle, valid or not, and the caller falls back.
func flatRecord(b []byte) (r sdk.Record, ok bool) {
	p := parser{b: b}
	p.space()
	if !p.eat('{') {
		return nil, false
	}
	r = make(sdk.Record, 8)
	p.space()
	if p.eat('}') {
		return r, p.end()
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if !p.eat(':') {
			return nil, false
		}
		p.space()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		r[key] = v
		p.space()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return r, p.end()
		}
		return nil, false
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str parses a string of printable ASCII without escapes.
func (p *parser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		}
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *parser) value() (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str()
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.b) && isNumberByte(p.b[p.i]) {
			p.i++
		}
		n := string(p.b[start:p.i])
		if !jsonnum.Valid(n) {
			return nil, false
		}
		return json.Number(n), true
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *parser) literal(word string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		p.i += len(word)
		return true
	}
	return false
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

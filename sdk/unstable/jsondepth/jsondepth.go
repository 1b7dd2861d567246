// Package jsondepth bounds how deeply a JSON document may nest, before any
// recursive reader sees it. It is a leaf of the SDK (standard library
// only), shared by the daemon and the SDK's record codec.
//
// Every reader of untrusted JSON in the daemon (request bodies, effects
// documents, Judge records, case files, adapter records from plugins,
// stored baselines, reward descriptors) either walks the text through
// CheckJSON first or counts depth itself, so that no reader recurses in
// proportion to the input: a record nested a million levels deep is
// refused after at most Max levels, never a stack overflow. CheckJSON is a
// loop with an explicit stack of at most Max entries; it reads nothing but
// brackets, quotes and commas, and leaves every other check to the parser
// that follows.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package jsondepth

import (
	"fmt"
	"strconv"
	"strings"
)

// Max is how many levels of objects and arrays (JSON) or mappings and
// sequences (YAML) a document may nest. Real documents use a handful.
const Max = 64

// Error is a document nested deeper than the limit. Path is where the
// first value past the limit starts (JSON path syntax: a.b[2].c, the
// caller's prefix first); Offset is its byte offset in the text read. A
// YAML document is located by Line instead (Offset is then 0).
type Error struct {
	Path   string
	Offset int
	Line   int
	Limit  int
}

func (e *Error) Error() string {
	where := e.Path
	if where == "" {
		where = "the document"
	}
	at := fmt.Sprintf("at byte %d", e.Offset)
	if e.Line > 0 {
		at = fmt.Sprintf("at line %d", e.Line)
	}
	return fmt.Sprintf("%s nests more than %d levels of objects and arrays (%s); flatten the value", where, e.Limit, at)
}

// frame is one open object or array.
type frame struct {
	array  bool
	index  int    // the element's index (arrays)
	key    string // the member's name (objects), clipped
	expect bool   // objects: the next string is a member name
}

// CheckJSON walks the JSON text data and returns an *Error when an object
// or array opens more than limit levels deep; the top-level value is level
// 1. path prefixes the paths it reports. Malformed text is not its concern:
// it returns nil for anything it cannot follow and the real parser then
// reports the syntax error.
func CheckJSON[T string | []byte](data T, path string, limit int) error {
	var stack []frame
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(data) {
				return nil // unterminated: the parser says so
			}
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].expect {
				stack[n-1].key = clipKey(string(data[i+1 : j]))
				stack[n-1].expect = false
			}
			i = j
		case '{', '[':
			if len(stack) >= limit {
				return &Error{Path: pathOf(path, stack), Offset: i, Limit: limit}
			}
			stack = append(stack, frame{array: c == '[', expect: c == '{'})
		case '}', ']':
			if len(stack) == 0 {
				return nil
			}
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].array {
					stack[n-1].index++
				} else {
					stack[n-1].expect = true
				}
			}
		}
	}
	return nil
}

// clipKey bounds a member name quoted in a path.
func clipKey(k string) string {
	const most = 64
	if len(k) > most {
		k = strings.ToValidUTF8(k[:most], "") + "…"
	}
	return k
}

// pathOf names the value being opened under the frames open so far.
func pathOf(prefix string, stack []frame) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, f := range stack {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

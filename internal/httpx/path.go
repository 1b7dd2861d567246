package httpx

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
)

// Path is a dotted path into decoded JSON: each segment is an object key,
// and a segment of digits indexes an array ("code.coding.0.code").
type Path []string

// ParsePath reads a dotted path. Empty segments are refused.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return nil, errors.New("the path is empty")
	}
	p := Path(strings.Split(s, "."))
	for i, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("segment %d of %q is empty; write keys separated by single dots, e.g. subject.reference", i+1, s)
		}
	}
	return p, nil
}

func (p Path) String() string { return strings.Join(p, ".") }

// Found says how a Lookup ended.
type Found int

const (
	// Missing: a key was absent, an index out of range, or a segment met a
	// value it cannot enter.
	Missing Found = iota
	// Null: the value, or a value on the way to it, is JSON null.
	Null
	// Present: the value is there.
	Present
)

// Lookup walks p from v.
func (p Path) Lookup(v any) (any, Found) {
	for _, seg := range p {
		switch x := v.(type) {
		case nil:
			return nil, Null
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, Missing
			}
			v = next
		case []any:
			i, ok := index(seg)
			if !ok || i >= len(x) {
				return nil, Missing
			}
			v = x[i]
		default:
			return nil, Missing
		}
	}
	if v == nil {
		return nil, Null
	}
	return v, Present
}

// index reads an array index: digits without a leading zero.
func index(seg string) (int, bool) {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(seg)
	return n, err == nil
}

// ListRecords turns a decoded JSON list of objects into records. where
// names the list in the error.
func ListRecords(v any, where string) ([]sdk.Record, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s holds %s, not a list of records", where, KindOf(v))
	}
	recs := make([]sdk.Record, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is %s, not a record (a JSON object)", where, i, KindOf(e))
		}
		recs[i] = sdk.Record(m)
	}
	return recs, nil
}

// KindOf names a decoded JSON value's type, never its content, in JSON's
// words: "an object" and "an array", and param.TypeName's for the rest
// ("null", "a string", "a number", "a boolean").
func KindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return param.TypeName(v)
}

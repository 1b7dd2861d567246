package compact

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// treeFrame is one object or array open in decodeTree.
type treeFrame struct {
	obj map[string]any // nil for an array
	arr []any
	key string // the object member whose value is being read
}

// decodeTree reads one JSON document into DecodeJSON's tree without
// recursion: open objects and arrays are a stack (whose depth the caller
// has bounded). Strings are read by the Scanner's string reader (spans of
// s without escapes, encoding/json's unquoting otherwise) and numbers by
// jsonnum.Scan, kept as their text.
func decodeTree(s string) (any, error) {
	sc := &Scanner{s: s}
	var stack []treeFrame
	i := skipWS(s, 0)
	for {
		// A value starts at i.
		if i >= len(s) {
			return nil, fmt.Errorf("unexpected end of JSON input")
		}
		var v any
		switch c := s[i]; {
		case c == '{':
			i = skipWS(s, i+1)
			if i < len(s) && s[i] == '}' {
				v, i = map[string]any{}, i+1
				break
			}
			stack = append(stack, treeFrame{obj: map[string]any{}})
			var err error
			if i, err = treeKey(sc, &stack[len(stack)-1], i); err != nil {
				return nil, err
			}
			continue
		case c == '[':
			i = skipWS(s, i+1)
			if i < len(s) && s[i] == ']' {
				v, i = []any{}, i+1
				break
			}
			stack = append(stack, treeFrame{arr: []any{}})
			continue
		case c == '"':
			str, next, serr := sc.str(i)
			if serr != nil {
				return nil, fmt.Errorf("%s at byte %d", serr.Msg, serr.Offset)
			}
			v, i = str, next
		case c == '-' || (c >= '0' && c <= '9'):
			n, err := jsonnum.Scan(s, i)
			if err != nil {
				return nil, fmt.Errorf("%v at byte %d", err, i)
			}
			v, i = json.Number(s[i:n.End]), n.End
		case strings.HasPrefix(s[i:], "true"):
			v, i = true, i+4
		case strings.HasPrefix(s[i:], "false"):
			v, i = false, i+5
		case strings.HasPrefix(s[i:], "null"):
			v, i = nil, i+4
		default:
			return nil, fmt.Errorf("invalid character %q looking for the beginning of a value at byte %d", c, i)
		}
		// v is complete: hand it to the open containers, closing those
		// that end after it.
		for {
			i = skipWS(s, i)
			if len(stack) == 0 {
				if i < len(s) {
					return nil, fmt.Errorf("unexpected data after the JSON document")
				}
				return v, nil
			}
			top := &stack[len(stack)-1]
			if top.obj != nil {
				top.obj[top.key] = v
			} else {
				top.arr = append(top.arr, v)
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unexpected end of JSON input")
			}
			if s[i] == ',' {
				i = skipWS(s, i+1)
				if top.obj != nil {
					var err error
					if i, err = treeKey(sc, top, i); err != nil {
						return nil, err
					}
				}
				break // the next member's value
			}
			switch {
			case top.obj != nil && s[i] == '}':
				v = top.obj
			case top.obj == nil && s[i] == ']':
				v = top.arr
			default:
				closer := ']'
				if top.obj != nil {
					closer = '}'
				}
				return nil, fmt.Errorf("invalid character %q after a value at byte %d; expected ',' or '%c'", s[i], i, closer)
			}
			i++
			stack = stack[:len(stack)-1]
		}
	}
}

// treeKey reads a member name and its colon at i into f.key, refusing a
// repeated name, and returns where the value starts.
func treeKey(sc *Scanner, f *treeFrame, i int) (int, error) {
	s := sc.s
	if i >= len(s) {
		return 0, fmt.Errorf("unexpected end of JSON input")
	}
	if s[i] != '"' {
		return 0, fmt.Errorf("invalid character %q at byte %d; expected a member name in double quotes", s[i], i)
	}
	key, next, serr := sc.str(i)
	if serr != nil {
		return 0, fmt.Errorf("%s at byte %d", serr.Msg, serr.Offset)
	}
	if _, dup := f.obj[key]; dup {
		return 0, fmt.Errorf("duplicate key %q", key)
	}
	i = skipWS(s, next)
	if i >= len(s) || s[i] != ':' {
		return 0, fmt.Errorf("expected ':' after the member name %q at byte %d", clipName(key), i)
	}
	f.key = key
	return skipWS(s, i+1), nil
}

// clipName bounds a member name quoted in an error.
func clipName(k string) string {
	if len(k) > 64 {
		return strings.ToValidUTF8(k[:64], "") + "…"
	}
	return k
}

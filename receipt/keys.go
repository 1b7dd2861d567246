package receipt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DuplicateKeyError is JSON that holds a key twice in one object, the keys
// compared without regard to case. Readers disagree on which of the two
// counts — Go's encoding/json matches a key in any case and keeps the
// last, jq and Python keep the last exact spelling — so a value forged
// beside the signed one could be read by one checker and not by another.
// Every reader of this package refuses such JSON.
type DuplicateKeyError struct {
	What  string // the JSON refused: "the envelope", "the signed payload", "line 4"
	Path  string // the object holding the key: "$", "$.signatures[0]"
	First string // the key as first written
	Again string // the key as written again (the same, or in another case)
}

func (e *DuplicateKeyError) Error() string {
	again := fmt.Sprintf("%q twice", e.First)
	if e.Again != e.First {
		again = fmt.Sprintf("%q and %q (keys are compared without regard to case)", e.First, e.Again)
	}
	return fmt.Sprintf("%s holds the key %s in the object at %s: refused, since JSON readers disagree on which value counts; take the receipt or export again from the daemon",
		e.What, again, e.Path)
}

// CheckKeys refuses JSON text that holds a key twice in any object at any
// depth, keys compared without regard to case, with a *DuplicateKeyError
// naming what (for its message) and the object's path. Text that is not
// JSON is not its concern: it returns nil and leaves the refusal to the
// decoder that reads it.
func CheckKeys(data []byte, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*keyFrame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil //nolint:nilerr // the end, or not JSON: the caller's decoder says which
		}
		var top *keyFrame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &keyFrame{path: top.childPath(), object: tok == json.Delim('{'), expectKey: true, seen: map[string]string{}})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if key, ok := tok.(string); ok && top != nil && top.object && top.expectKey {
				if err := top.addKey(key, what); err != nil {
					return err
				}
				continue
			}
		}
		if n := len(stack); n > 0 {
			stack[n-1].valueDone()
		}
	}
}

// keyFrame is one open object or array of CheckKeys' walk.
type keyFrame struct {
	path      string
	object    bool
	expectKey bool              // objects: the next string is a key
	key       string            // objects: the current member's key
	index     int               // arrays: the current element's index
	seen      map[string]string // objects: folded key -> the key as written
}

// addKey records key in f, refusing one seen before in any case.
func (f *keyFrame) addKey(key, what string) error {
	folded := foldKey(key)
	if first, dup := f.seen[folded]; dup {
		return &DuplicateKeyError{What: what, Path: f.path, First: first, Again: key}
	}
	f.seen[folded] = key
	f.key, f.expectKey = key, false
	return nil
}

// valueDone moves f past the value just read.
func (f *keyFrame) valueDone() {
	if f.object {
		f.expectKey = true
	} else {
		f.index++
	}
}

// childPath is the path of the value f is about to read ("$" at the top).
func (f *keyFrame) childPath() string {
	switch {
	case f == nil:
		return "$"
	case f.object:
		return f.path + "." + f.key
	}
	return f.path + "[" + strconv.Itoa(f.index) + "]"
}

// foldKey is key as Go's encoding/json compares it: two keys that
// bytes.EqualFold matches fold alike (the Kelvin sign and the long s
// included).
func foldKey(key string) string { return strings.ToLower(strings.ToUpper(key)) }

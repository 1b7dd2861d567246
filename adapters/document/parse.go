package document

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/verifierd/verifierd/internal/httpx"
)

// maxDocumentBytes bounds what is parsed of one document; a larger one is
// a record with parseable false, never a partial parse.
const maxDocumentBytes = 64 << 20

// readCapped reads r whole, up to maxDocumentBytes; tooBig reports more.
func readCapped(r io.Reader) (data []byte, tooBig bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > maxDocumentBytes {
		return nil, true, nil
	}
	return data, false, nil
}

// parseJSON reads one JSON value (nothing may follow it) and maps it to
// fields: each document_field_paths entry when configured, else the
// top-level keys of an object (a key the adapter sets itself is offered as
// "document.<key>"). Numbers keep their exact text. A path that leads
// nowhere leaves its field out.
func (s *settings) parseJSON(data []byte) (map[string]any, error) {
	doc, err := httpx.DecodeJSON(data)
	if trailing, ok := errors.AsType[*httpx.TrailingDataError](err); ok {
		return nil, fmt.Errorf("not valid JSON: something follows the value at byte %d", trailing.Offset)
	}
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty document: no JSON value")
	}
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	fields := map[string]any{}
	if s.fields == nil {
		if obj, ok := doc.(map[string]any); ok {
			for k, v := range obj {
				if reserved[k] {
					k = "document." + k
				}
				fields[k] = v
			}
		}
		return fields, nil
	}
	for _, fp := range s.fields {
		if v, ok := fp.lookup(doc); ok {
			fields[fp.field] = v
		}
	}
	return fields, nil
}

// lookup follows the field's path into doc: a key into an object, an index
// (0, 1, ...) into an array. A JSON null at the end of the path is the
// field's value; a path that leads nowhere, or through a null, gives none.
func (fp fieldPath) lookup(doc any) (any, bool) {
	v, found := fp.path.Lookup(doc)
	if found == httpx.Null {
		_, parent := fp.path[:len(fp.path)-1].Lookup(doc)
		return nil, parent == httpx.Present
	}
	return v, found == httpx.Present
}

// parseText applies document_text_pattern to the document: its first match
// gives one field per named group that took part in it. No match means the
// document does not parse.
func (s *settings) parseText(data []byte) (map[string]any, error) {
	m := s.text.FindSubmatchIndex(data)
	if m == nil {
		return nil, errors.New("document_text_pattern does not match")
	}
	fields := map[string]any{}
	for i, name := range s.text.SubexpNames() {
		if name == "" || m[2*i] < 0 {
			continue
		}
		fields[name] = strings.ToValidUTF8(string(data[m[2*i]:m[2*i+1]]), "\uFFFD")
	}
	return fields, nil
}

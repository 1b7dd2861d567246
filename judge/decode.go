package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/verifierd/verifierd/judge/internal/compact"
	"github.com/verifierd/verifierd/sdk/jsondepth"
)

// MaxDepth is how many levels of objects and arrays (mappings and
// sequences) any document the judge reads may nest: effects documents,
// records, case files, reward descriptors. Deeper input is refused while it
// is read, never handed to a recursive reader.
const MaxDepth = jsondepth.Max

// MaxDocumentSeparators bounds the commas and line breaks of a document
// DecodeDocument reads (effects, deployments, workflows, reward
// contracts): 1,000 contracts of 60 lines each fit.
const MaxDocumentSeparators = 65536

// DecodeJSON parses one JSON document into a tree of map[string]any, []any,
// string, json.Number, bool and nil. Unlike encoding/json it refuses a
// duplicate object key (the later one would silently win) and trailing data.
// A document nested more than MaxDepth levels is refused (a
// *jsondepth.Error naming the path) before it is read. It accepts exactly
// what encoding/json accepts, with the same values (FuzzDecodeJSON); the
// reader is a loop with an explicit stack (jsontree.go), and strings
// without escapes and numbers are spans of one copy of data.
func DecodeJSON(data []byte) (any, error) { return compact.DecodeJSON(data) }

// DecodeDocument parses YAML or JSON (JSON when the document parses as
// JSON; YAML otherwise, flow style included) into the same tree DecodeJSON returns. YAML
// integers and floats become json.Number so that a contract written as
// `id: 1` is seen as a number and refused, exactly as in JSON.
//
// A contract document is small: one with more than MaxDocumentSeparators
// commas and line breaks together (an upper bound on its values, each
// flow entry needing a comma and each block entry a line) is refused
// before it is parsed, so that a 1 MiB document of tiny values cannot make
// the YAML reader build half a million nodes (~370 bytes each).
func DecodeDocument(data []byte) (any, error) {
	if n := bytes.Count(data, []byte{','}) + bytes.Count(data, []byte{'\n'}); n > MaxDocumentSeparators {
		return nil, fmt.Errorf("the document has %d commas and line breaks, over the limit of %d for a contract document; split it", n, MaxDocumentSeparators)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		// JSON first, so that JSON keeps its exact number text; a flow-style
		// YAML document ([{kind: record_written}]) is not JSON and falls
		// through to the YAML reader.
		tree, jerr := DecodeJSON(trimmed)
		if jerr == nil {
			return tree, nil
		}
		if _, deep := errors.AsType[*jsondepth.Error](jerr); deep {
			return nil, jerr // as deep read as YAML: no second try
		}
		if ytree, yerr := decodeYAML(data); yerr == nil {
			return ytree, nil
		}
		return nil, jerr
	}
	return decodeYAML(data)
}

func decodeYAML(data []byte) (any, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the document is empty")
		}
		if strings.Contains(err.Error(), "exceeded max depth") {
			// The YAML reader's own bound (10,000 levels), met while it
			// scans: far past ours.
			return nil, &jsondepth.Error{Limit: MaxDepth}
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; write one")
	}
	return yamlTree(&doc, 0)
}

// yamlTree converts the node tree. The YAML library refuses nesting past
// 10,000 levels while it scans (flow brackets and block indentation both),
// so its own tree building stays shallow enough; this conversion counts
// depth and refuses past MaxDepth before recursing further. The document
// node itself is level 0.
func yamlTree(n *yaml.Node, depth int) (any, error) {
	if depth > MaxDepth && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) {
		return nil, &jsondepth.Error{Line: n.Line, Limit: MaxDepth}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlTree(n.Content[0], depth+1)
	case yaml.AliasNode:
		// Aliases can multiply a small file into a huge tree; a contract
		// never needs one.
		return nil, fmt.Errorf("line %d: YAML aliases are not allowed; write the value out", n.Line)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Kind != yaml.ScalarNode || kn.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: a mapping key must be a plain string", kn.Line)
			}
			if _, dup := m[kn.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", kn.Line, kn.Value)
			}
			v, err := yamlTree(vn, depth+1)
			if err != nil {
				return nil, err
			}
			m[kn.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		a := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlTree(c, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!binary", "!!timestamp":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			return b, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return json.Number(n.Value), nil //nolint:nilerr // too large for int64: keep the exact text
			}
			return json.Number(strconv.FormatInt(i, 10)), nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		default:
			return n.Value, nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

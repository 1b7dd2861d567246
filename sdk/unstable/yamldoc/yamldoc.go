// Package yamldoc reads a YAML document into the tree verifierd's judge
// and daemon read every document as: map[string]any, []any, string,
// json.Number, bool and nil. It is the daemon's own YAML reader (the judge's
// DecodeDocument calls it), so sdk/adaptertest reads a deployment exactly as
// the daemon does.
//
// Integers and floats become json.Number in their canonical text (0x10 is
// 16, 1.50 is 1.5); a key that is not a plain string, a duplicate key, an
// alias and nesting past jsondepth.Max levels are refused, naming the line.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package yamldoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// Separators counts the commas and line breaks of data: an upper bound on
// the values a YAML reader builds nodes for (each flow entry needs a
// comma, each block entry a line). Every line break YAML knows counts:
// \n, \r, \r\n (once), NEL (U+0085), LS (U+2028) and PS (U+2029), so a
// document cannot hide its lines from the count behind another break. It
// allocates nothing.
func Separators(data []byte) int {
	// Vectorized scans: one per separator, and one hop per \r.
	n := bytes.Count(data, []byte{','}) + bytes.Count(data, []byte{'\n'})
	for rest := data; ; {
		i := bytes.IndexByte(rest, '\r')
		if i < 0 {
			break
		}
		if rest = rest[i+1:]; len(rest) == 0 || rest[0] != '\n' {
			n++ // a lone \r; a \r\n counts at its \n
		}
	}
	return n + bytes.Count(data, nel) + bytes.Count(data, ls) + bytes.Count(data, ps)
}

// The line breaks beyond ASCII that YAML knows, in UTF-8.
var (
	nel = []byte("\u0085")
	ls  = []byte("\u2028")
	ps  = []byte("\u2029")
)

// Decode reads exactly one YAML document. An empty document, or more than
// one, is refused.
func Decode(data []byte) (any, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the document is empty")
		}
		if strings.Contains(err.Error(), "exceeded max depth") {
			// The YAML reader's own bound (10,000 levels), met while it
			// scans: far past ours.
			return nil, &jsondepth.Error{Limit: jsondepth.Max}
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
// depth and refuses past jsondepth.Max before recursing further. The document
// node itself is level 0.
func yamlTree(n *yaml.Node, depth int) (any, error) {
	if depth > jsondepth.Max && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) {
		return nil, &jsondepth.Error{Line: n.Line, Limit: jsondepth.Max}
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

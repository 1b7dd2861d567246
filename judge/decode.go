package judge

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
	"github.com/verifierd/verifierd/sdk/unstable/yamldoc"
)

// MaxDepth is how many levels of objects and arrays (mappings and
// sequences) any document the judge reads may nest: effects documents,
// records, case files, reward descriptors. Deeper input is refused while it
// is read, never handed to a recursive reader.
const MaxDepth = jsondepth.Max

// MaxDocumentSeparators bounds the commas and line breaks (every kind YAML
// knows: yamldoc.Separators) of a document DecodeDocument reads (effects, deployments, workflows, reward
// contracts): 1,000 contracts of 60 lines each fit.
const MaxDocumentSeparators = 65536

// DefaultMaxRecords is the default bound on the records one Judge request
// carries, its before and after reads together (the daemon's
// --max-judge-records): the records are counted in the request's bytes
// before any record is decoded, and a request over the bound is refused.
// At 100,000 records of three fields a Judge request costs the daemon
// under 256 MiB at its peak, over HTTP/JSON (whose gateway builds every
// record as a google.protobuf.Struct) as over gRPC (whose records are
// decoded one at a time).
const DefaultMaxRecords = 100_000

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
// commas and line breaks together (\n, \r, \r\n, NEL, LS and PS alike) (an upper bound on its values, each
// flow entry needing a comma and each block entry a line) is refused
// before it is parsed, so that a 1 MiB document of tiny values cannot make
// the YAML reader build half a million nodes (~370 bytes each).
func DecodeDocument(data []byte) (any, error) {
	if n := yamldoc.Separators(data); n > MaxDocumentSeparators {
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

// decodeYAML is the SDK's YAML reader (sdk/unstable/yamldoc), which the
// qualification kit reads deployments with too. Its depth bound is
// jsondepth.Max, which MaxDepth is.
func decodeYAML(data []byte) (any, error) { return yamldoc.Decode(data) }

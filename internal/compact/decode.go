package compact

import "github.com/verifierd/verifierd/sdk/unstable/jsondepth"

// MaxDepth is how many levels of objects and arrays a document may nest
// (judge.MaxDepth).
const MaxDepth = jsondepth.Max

// DecodeJSON is judge.DecodeJSON: one JSON document into a tree of
// map[string]any, []any, string, json.Number, bool and nil, refusing a
// duplicate key, trailing data and nesting deeper than MaxDepth.
func DecodeJSON(data []byte) (any, error) {
	if err := jsondepth.CheckJSON(data, "", MaxDepth); err != nil {
		return nil, err
	}
	return decodeTree(string(data))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

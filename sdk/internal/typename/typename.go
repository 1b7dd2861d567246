// Package typename names a decoded YAML or JSON value's type for a message,
// never its content: the one wording the SDK's packages refuse a value of
// the wrong type with (param.TypeName, the timestamp parser).
package typename

import (
	"encoding/json"
	"fmt"
)

// Of names v's type: "null", "a string", "a number", "a boolean", "a map",
// "a list", or Go's name of any other type.
func Of(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, int, int64, uint64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

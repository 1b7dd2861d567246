package strict_test

import (
	"errors"
	"testing"

	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

type fuzzTarget struct {
	Name  string            `json:"name" strict:"required"`
	N     int               `json:"n"`
	F     *float64          `json:"f"`
	B     bool              `json:"b"`
	List  []fuzzTarget      `json:"list"`
	Map   map[string]string `json:"map"`
	Any   any               `json:"any"`
	Inner *fuzzTarget       `json:"inner"`
}

// FuzzDecodeJSON: any text is decoded or refused with a *strict.Error,
// never a panic, and a refusal always names a code.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"name":"a"}`, `{"name":"a","list":[{"name":"b","n":2}]}`, `{"nam":1}`, `[`, `{"inner":{"inner":{}}}`, `{"map":{"a":1}}`, `{"f":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v fuzzTarget
		err := strict.DecodeJSON(data, "doc", &v)
		if err == nil {
			return
		}
		se, ok := errors.AsType[*strict.Error](err)
		if !ok || se.Code == "" || se.Message == "" {
			t.Fatalf("refusal %v (%T) is not a complete *strict.Error", err, err)
		}
	})
}

package judge

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// deepJSON is n arrays, one inside the other, around 1.
func deepJSON(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }

// A document nested far past the limit is refused while it is read, with
// the path where the limit is passed: never a stack overflow (1.5 million
// levels used to end the process).
func TestDecodeRefusesDeepNesting(t *testing.T) {
	deep := `{"a": {"b": [` + deepJSON(1_500_000) + `]}}`
	_, err := DecodeJSON([]byte(deep))
	ne, ok := errors.AsType[*jsondepth.Error](err)
	if !ok {
		t.Fatalf("DecodeJSON(1.5M levels) = %v, want a *jsondepth.Error", err)
	}
	if !strings.HasPrefix(ne.Path, "a.b[0]") || strings.Count(ne.Path, "[0]") != MaxDepth-2 || ne.Limit != MaxDepth {
		t.Fatalf("path %q (limit %d): want a.b[0] and %d indexes in all", ne.Path, ne.Limit, MaxDepth-2)
	}
	if _, err := DecodeDocument([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nests more than 64 levels") {
		t.Fatalf("DecodeDocument(1.5M levels) = %v", err)
	}
	// Exactly at the limit is fine; one more is not.
	if _, err := DecodeJSON([]byte(deepJSON(MaxDepth))); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	if _, err := DecodeJSON([]byte(deepJSON(MaxDepth + 1))); err == nil {
		t.Fatalf("%d levels accepted", MaxDepth+1)
	}
	// Brackets inside strings are not jsondepth.
	if _, err := DecodeJSON([]byte(`{"k": "` + strings.Repeat("[{", 1000) + `\"]"}`)); err != nil {
		t.Fatalf("brackets in a string: %v", err)
	}
}

// YAML: flow brackets and block indentation, far past the limit, are
// refused without a crash; the limit itself is 64 levels.
func TestDecodeDocumentRefusesDeepYAML(t *testing.T) {
	cases := map[string]string{
		"flow 1.5M":    strings.Repeat("[", 1_500_000),
		"flow closed":  "- " + deepJSON(1_500_000)[1:], // not JSON: YAML reads it
		"block 20000":  strings.Repeat("- ", 20000) + "x\n",
		"mapping 1400": yamlMappings(1400), // 1 MiB of indentation
		"flow 65":      "- " + strings.Repeat("[", 64) + "x" + strings.Repeat("]", 64) + "\n",
		"mapping 65":   yamlMappings(64),
	}
	for name, doc := range cases {
		_, err := DecodeDocument([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), "max depth") && !strings.Contains(err.Error(), "more than 64 levels") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeDocument([]byte(yamlMappings(63))); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
}

// yamlMappings is n+1 block mappings, one inside the other.
func yamlMappings(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("k:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "v: 1\n")
	return b.String()
}

// Records: a field nested past the limit is refused with its path, by
// every record reader.
func TestRecordsRefuseDeepNesting(t *testing.T) {
	rec := `{"id": "1", "x": ` + deepJSON(1_500_000) + `}`
	_, err := DecodeRecordList([][]byte{[]byte(`{"id": "0"}`), []byte(rec)}, "after.records_json")
	se, ok := errors.AsType[*SyntaxError](err)
	if !ok || !strings.HasPrefix(se.Path, "after.records_json[1].x[0][0]") || !strings.Contains(se.Msg, "more than 64 levels") {
		t.Fatalf("DecodeRecordList = %v", err)
	}
	if _, err := compact.DecodeRecords(`[`+rec+`]`, "records"); err == nil || !strings.Contains(err.Error(), "more than 64 levels") {
		t.Fatalf("DecodeRecords = %v", err)
	}
	// The record is a level: a field may nest 63 more.
	ok63 := `{"x": ` + deepJSON(MaxDepth-1) + `}`
	if _, err := DecodeRecordList([][]byte{[]byte(ok63)}, "r"); err != nil {
		t.Fatalf("64 levels in all: %v", err)
	}
	if _, err := DecodeRecordList([][]byte{[]byte(`{"x": ` + deepJSON(MaxDepth) + `}`)}, "r"); err == nil {
		t.Fatal("65 levels accepted")
	}
	sc := compact.NewScanner(`{"v": ` + deepJSON(1_500_000) + `}`)
	err = sc.Object("", func(_, path string) error { _, err := sc.Value(path); return err })
	if se, ok := errors.AsType[*SyntaxError](err); !ok || !strings.HasPrefix(se.Path, "v[0]") {
		t.Fatalf("compact.Scanner.Value = %v", err)
	}
}

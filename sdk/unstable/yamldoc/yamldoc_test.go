package yamldoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	got, err := Decode([]byte("a: 1.50\nb: 0x10\nc: [x, true, null]\nd: {e: '2'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": json.Number("1.5"), "b": json.Number("16"), "c": []any{"x", true, nil}, "d": map[string]any{"e": "2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ doc, want string }{
		{"", "empty"},
		{"a: 1\n---\nb: 2\n", "more than one"},
		{"a: &x 1\nb: *x\n", "aliases"},
		{"a: 1\na: 2\n", "duplicate key"},
		{"? [a]\n: 1\n", "plain string"},
	} {
		if _, err := Decode([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v; want an error saying %q", tc.doc, err, tc.want)
		}
	}
	deep := strings.Repeat("[", jsondepth.Max+1) + strings.Repeat("]", jsondepth.Max+1)
	if _, err := Decode([]byte(deep)); !errors.As(err, new(*jsondepth.Error)) {
		t.Errorf("a document %d levels deep: %v; want a *jsondepth.Error", jsondepth.Max+1, err)
	}
}

// Every line break YAML knows counts once, \r\n included; other bytes of
// the same leading bytes do not.
func TestSeparators(t *testing.T) {
	for in, want := range map[string]int{
		"":                0,
		"a, b\nc":         2,
		"-\r-\r-\r":       3,
		"-\r\n-\r\n":      2,
		"-\u0085-\u0085":  2,
		"-\u2028-\u2029-": 2,
		"é\u00a0\u2027\r": 1, // C3, C2 A0, E2 80 A7 are no breaks
		"\r":              1,
	} {
		if got := Separators([]byte(in)); got != want {
			t.Errorf("Separators(%q) = %d, want %d", in, got, want)
		}
	}
}

// BenchmarkSeparators counts the separators of a 1 MiB document, with \n
// and with \r\n line ends: every line break (Separators) against the two
// bytes.Count passes it replaced.
func BenchmarkSeparators(b *testing.B) {
	for _, end := range []string{"\n", "\r\n"} {
		doc := []byte(strings.Repeat("- kind: record_written"+end+"  match: {a: 1, b: 2}"+end, 1<<20/48))
		b.Run(fmt.Sprintf("Separators/%q", end), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				_ = Separators(doc)
			}
		})
		b.Run(fmt.Sprintf("bytes.Count/%q", end), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				_ = bytes.Count(doc, []byte{','}) + bytes.Count(doc, []byte{'\n'})
			}
		})
	}
}

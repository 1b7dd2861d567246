package judge

import (
	"strings"
	"testing"
)

// A contract document whose lines end in another break than \n (\r, NEL,
// LS, PS) is counted by its lines all the same, and refused before it is
// parsed; one within the bound still parses, \r\n counting once.
func TestDecodeDocumentCountsEveryLineBreak(t *testing.T) {
	for name, brk := range map[string]string{"CR": "\r", "NEL": "\u0085", "LS": "\u2028", "PS": "\u2029", "CRLF": "\r\n"} {
		doc := strings.Repeat("-"+brk, MaxDocumentSeparators+1)
		_, err := DecodeDocument([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "line breaks") {
			t.Errorf("%s: %d lines: %v, want the separator limit", name, MaxDocumentSeparators+1, err)
		}
	}
	tree, err := DecodeDocument([]byte("- a\r\n- b\r\n"))
	if list, ok := tree.([]any); err != nil || !ok || len(list) != 2 {
		t.Fatalf("a CRLF document of two entries: %v %v", tree, err)
	}
}

package editdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"record_writen", "record_written", 1},
		{"flaw", "lawn", 2},
		{"same", "same", 0},
	} {
		if got := Levenshtein([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("Levenshtein(%q, %q) on bytes = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Levenshtein([]rune(c.a), []rune(c.b)); got != c.want {
			t.Errorf("Levenshtein(%q, %q) on runes = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	// Runes count characters, bytes count UTF-8 bytes.
	if got := Levenshtein([]rune("Müller"), []rune("Muller")); got != 1 {
		t.Errorf("runes: Müller/Muller = %d, want 1", got)
	}
	if got := Levenshtein([]byte("Müller"), []byte("Muller")); got != 2 {
		t.Errorf("bytes: Müller/Muller = %d, want 2", got)
	}
}

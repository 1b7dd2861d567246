package onscreen

import (
	"strings"
	"unicode"

	"github.com/verifierd/verifierd/internal/editdist"
)

// normalize lower-cases s and makes every run of white space one space, so
// that the comparison ignores case and spacing, as a screen does.
func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}

// collapse trims s and makes every run of white space one space.
func collapse(s string) string {
	return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
}

// similarity is 1 minus the edit distance of the normalised texts over the
// longer one's length, in characters: 1 for the same text, 0 for nothing in
// common.
func similarity(a, b string) float64 {
	ra, rb := []rune(normalize(a)), []rune(normalize(b))
	n := max(len(ra), len(rb))
	if n == 0 {
		return 1
	}
	return 1 - float64(editdist.Levenshtein(ra, rb))/float64(n)
}

// valueOf is the record value of a field that showed text: the run's value
// when the text matches it closely enough (OCR misreads a character now and
// then), otherwise the text as shown.
func valueOf(f field, shown string) string {
	if similarity(shown, f.expected) >= f.minRatio {
		return f.expected
	}
	return collapse(shown)
}

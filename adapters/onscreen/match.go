package onscreen

import (
	"strings"
	"unicode"
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
	return 1 - float64(levenshtein(ra, rb))/float64(n)
}

func levenshtein(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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

// Package editdist is the Levenshtein edit distance, over runes or bytes:
// how closely the onscreen adapter's OCR'd text matches the expected value.
// (A misspelt key's nearest known key is sdk/unstable/strict's Closest, which keeps
// a byte-wise copy: the SDK module cannot import the daemon's packages.) A
// leaf: standard library only.
package editdist

// Levenshtein is the least number of single-element insertions, deletions
// and substitutions that turn a into b. It keeps two rows of len(b)+1.
func Levenshtein[T comparable](a, b []T) int {
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

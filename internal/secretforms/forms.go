// Package secretforms finds a secret in text in every form it takes on the
// way through a system of record: the value in any ASCII case, its base64
// (standard and URL alphabets, padded and not), its URL escapes, the
// password of a user:password pair, the credential after a scheme word,
// and any of these as a JSON string escapes it. A Matcher finds all forms
// of a set of secrets in one pass, leftmost and then longest first, and
// never matches its own marker, so that masking never masks a marker
// again. The daemon masks records, reasons and stored baselines with it
// (internal/session); the HTTP adapters their logs and messages
// (internal/httpx). A leaf: standard library only.
package secretforms

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Form is one form a secret's value takes in text: the value itself,
// its base64, its URL-escaped text, the password of a user:password pair,
// or such a form as a JSON string carries it. Every form is matched without
// regard to ASCII case.
type Form struct {
	text string // the form as written
	fold string // text, ASCII letters lowered
	// Slot is the secret's slot (the dotted path of its *_env key, or its
	// secret_env name).
	Slot string
	// Name is the form's name in a placeholder: "" for the value as
	// configured, else "base64", "password.query", "json"…
	Name string
	// keep marks a marker (Marker, a placeholder's opening): found, it is
	// written as it is, so that masking never masks its own marker.
	keep bool
}

// Marker replaces a secret's form wherever masked text carries it.
const Marker = "[redacted]"

// Text is the form as written.
func (f *Form) Text() string { return f.text }

// markers are the forms a matcher keeps as they are.
var markers = []Form{
	{text: Marker, fold: Marker, keep: true},
	{text: "[redacted:", fold: "[redacted:", keep: true},
}

// MinBytes is the shortest part of a value that is a form of its own (the
// password of a pair, the credential after a scheme word): a shorter one
// would mask ordinary text with it.
const MinBytes = 8

// Of lists every form of the value v of slot: v; for a user:password pair
// (a slot ending in basic_env) the password alone; for a value with a
// scheme word ("token key:secret", "Bearer abc…") the credential after
// it; each of these (parts of MinBytes or more) in base64 (standard and
// URL alphabets, padded and not); each of those query- and path-escaped;
// and each result as a JSON string carries it (json.Marshal's escapes)
// when that differs.
func Of(slot, v string) []Form {
	bases := []Form{{text: v}}
	if _, pass, ok := strings.Cut(v, ":"); ok && strings.HasSuffix(slot, "basic_env") && len(pass) >= MinBytes {
		bases = append(bases, Form{text: pass, Name: "password"})
	}
	if _, cred, ok := strings.Cut(v, " "); ok && len(cred) >= MinBytes {
		bases = append(bases, Form{text: cred, Name: "credential"})
	}
	var out []Form
	for _, b := range bases {
		for _, e := range base64Forms(b) {
			out = append(out, escapedForms(e)...)
		}
	}
	for _, f := range slices.Clone(out) {
		enc, _ := json.Marshal(f.text)
		if js := string(enc[1 : len(enc)-1]); js != f.text {
			out = append(out, Form{text: js, Name: join(f.Name, "json")})
		}
	}
	for i := range out {
		out[i].Slot = slot
		out[i].fold = foldASCII(out[i].text)
	}
	return out
}

// base64Forms is f and f's text in the four base64 encodings.
func base64Forms(f Form) []Form {
	out := []Form{f}
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{{"base64", base64.StdEncoding}, {"base64raw", base64.RawStdEncoding}, {"base64url", base64.URLEncoding}, {"base64urlraw", base64.RawURLEncoding}} {
		out = append(out, Form{text: enc.e.EncodeToString([]byte(f.text)), Name: join(f.Name, enc.name)})
	}
	return out
}

// escapedForms is f and f's text query- and path-escaped, when that
// differs.
func escapedForms(f Form) []Form {
	out := []Form{f}
	if q := url.QueryEscape(f.text); q != f.text {
		out = append(out, Form{text: q, Name: join(f.Name, "query")})
	}
	if p := url.PathEscape(f.text); p != f.text {
		out = append(out, Form{text: p, Name: join(f.Name, "path")})
	}
	return out
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// lowerASCII maps each byte to its ASCII lower case.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i + 'a' - 'A')
		}
	}
	return t
}()

func foldASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerASCII[c]
	}
	return string(b)
}

// upperASCII is s with its ASCII letters in upper case.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// foldEqual reports whether s equals fold (lowered) without regard to
// ASCII case.
func foldEqual[T string | []byte](s T, fold string) bool {
	if len(s) != len(fold) {
		return false
	}
	for i := range len(fold) {
		if lowerASCII[s[i]] != fold[i] {
			return false
		}
	}
	return true
}

// filterBits sizes matcher's prefix filter (2^filterBits entries).
const filterBits = 12

// Matcher finds every form of a set of secrets in one pass over a text:
// at each position the next k bytes (k: the shortest form, at most 8),
// lowered, are a rolling word; a bit table hashed from it rules out almost
// every position, and at the others the forms sharing that prefix are
// compared, longest first. The leftmost, then longest, form wins; a
// replacement is never searched again, so a marker is never masked.
type Matcher struct {
	k        int
	filter   [1 << filterBits]bool
	byPrefix map[uint64][]int // lowered k-byte prefix -> forms, longest first
	forms    []Form
}

// NewMatcher builds a Matcher over forms (no two with the same lowered
// text: the first is kept). It is nil when forms is empty; a nil Matcher
// finds nothing.
func NewMatcher(forms []Form) *Matcher {
	forms = slices.Clone(forms)
	slices.SortStableFunc(forms, func(a, b Form) int { return len(b.text) - len(a.text) })
	seen := map[string]bool{}
	m := &Matcher{k: 8, byPrefix: map[uint64][]int{}}
	for _, f := range forms {
		if f.text == "" || seen[f.fold] || slices.ContainsFunc(markers, func(k Form) bool { return k.fold == f.fold }) {
			continue
		}
		seen[f.fold] = true
		m.forms = append(m.forms, f)
		m.k = min(m.k, len(f.text))
	}
	if len(m.forms) == 0 {
		return nil
	}
	m.forms = append(m.forms, markers...)
	slices.SortStableFunc(m.forms, func(a, b Form) int { return len(b.text) - len(a.text) })
	for i, f := range m.forms {
		w := word(f.fold, 0, m.k)
		m.filter[hashWord(w)] = true
		m.byPrefix[w] = append(m.byPrefix[w], i)
	}
	return m
}

// word is the lowered bytes s[at:at+k] as an integer.
func word[T string | []byte](s T, at, k int) uint64 {
	var w uint64
	for j := at; j < at+k; j++ {
		w = w<<8 | uint64(lowerASCII[s[j]])
	}
	return w
}

func hashWord(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> (64 - filterBits) }

// next returns the position and form of the first form found in t at or
// after from, or -1 and nil.
func next[T string | []byte](m *Matcher, t T, from int) (int, *Form) {
	if m == nil || len(t)-from < m.k {
		return -1, nil
	}
	keep := ^uint64(0)
	if m.k < 8 {
		keep = 1<<(8*m.k) - 1
	}
	w := word(t, from, m.k)
	for i := from; ; i++ {
		if m.filter[hashWord(w)] {
			for _, fi := range m.byPrefix[w] {
				f := &m.forms[fi]
				if end := i + len(f.text); end <= len(t) && foldEqual(t[i:end], f.fold) {
					return i, f
				}
			}
		}
		if i+m.k >= len(t) {
			return -1, nil
		}
		w = (w<<8 | uint64(lowerASCII[t[i+m.k]])) & keep
	}
}

// Replace returns t with every form found replaced by with(form, the text
// found); t itself when none is. A marker found is kept as it is.
func (m *Matcher) Replace(t string, with func(f *Form, found string) string) string {
	i, f := next(m, t, 0)
	if f == nil {
		return t
	}
	var b strings.Builder
	b.Grow(len(t))
	last := 0
	for f != nil {
		b.WriteString(t[last:i])
		end := i + len(f.text)
		if f.keep {
			b.WriteString(t[i:end])
		} else {
			b.WriteString(with(f, t[i:end]))
		}
		last = end
		i, f = next(m, t, last)
	}
	b.WriteString(t[last:])
	return b.String()
}

// Contains reports whether any form (not a marker) is in t.
func (m *Matcher) Contains(t []byte) bool {
	for i, f := next(m, t, 0); f != nil; i, f = next(m, t, i+len(f.text)) {
		if !f.keep {
			return true
		}
	}
	return false
}

// Case variants of a form a stored placeholder names: a form found as
// written is restored as written, one found all lower or all upper case
// is restored so; any other mix of cases cannot be restored.
const (
	caseLower = "lower"
	caseUpper = "upper"
	caseMixed = "mixed"
)

// Mixed reports whether p, a Placeholder, names a form found in a mix of
// cases, which cannot be put back.
func Mixed(p string) bool {
	return strings.HasSuffix(p, "."+caseMixed+"]") || strings.HasSuffix(p, "~"+caseMixed+"]")
}

// Forms lists m's forms, markers excluded.
func (m *Matcher) Forms() []*Form {
	if m == nil {
		return nil
	}
	var out []*Form
	for i := range m.forms {
		if !m.forms[i].keep {
			out = append(out, &m.forms[i])
		}
	}
	return out
}

// Mask returns t with every form m finds replaced by Marker.
func (m *Matcher) Mask(t string) string {
	return m.Replace(t, func(*Form, string) string { return Marker })
}

// Placeholder is what a stored baseline holds in place of found, a
// match of f: "[redacted:SLOT]" for the value as configured,
// "[redacted:SLOT~FORM]" for another form, FORM ending in ".lower",
// ".upper" or ".mixed" when the case of found is not f's.
func Placeholder(f *Form, found string) string {
	name := f.Name
	switch found {
	case f.text:
	case f.fold:
		name = join(name, caseLower)
	case upperASCII(f.text):
		name = join(name, caseUpper)
	default:
		name = join(name, caseMixed)
	}
	if name == "" {
		return "[redacted:" + f.Slot + "]"
	}
	return "[redacted:" + f.Slot + "~" + name + "]"
}

// Restorable lists each placeholder f can be put back from, with the text
// it stands for.
func (f *Form) Restorable() [][2]string {
	out := [][2]string{{Placeholder(f, f.text), f.text}}
	if f.fold != f.text {
		out = append(out, [2]string{Placeholder(f, f.fold), f.fold})
	}
	if up := upperASCII(f.text); up != f.text && up != f.fold {
		out = append(out, [2]string{Placeholder(f, up), up})
	}
	return out
}

package judge

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/url"
	"strings"

	"github.com/verifierd/verifierd/internal/compact"
)

// KeyedPrefix starts every keyed digest and every keyed baseline value.
const KeyedPrefix = "hmac-sha256:"

// NewKeyedHash is the HMAC-SHA-256 under key behind every keyed digest.
func NewKeyedHash(key []byte) hash.Hash { return hmac.New(sha256.New, key) }

// KeyedSum is the keyed digest of what h has been written: KeyedPrefix and
// the hex sum.
func KeyedSum(h hash.Hash) string { return KeyedPrefix + hex.EncodeToString(h.Sum(nil)) }

// Digester turns a record into the digest a reconciliation task lists.
type Digester func(Record) string

// KeyedDigester digests records as "hmac-sha256:" and the hex HMAC-SHA-256,
// under key, of their canonical JSON. Without the key a digest of a
// low-entropy record ({"id":"1","patient_id":"p1"}) cannot be matched by
// trying candidate records; with it, an operator can still check that a
// record they hold is the one a task names.
func KeyedDigester(key []byte) Digester {
	return func(r Record) string {
		mac := NewKeyedHash(key)
		mac.Write([]byte(CanonicalJSON(r)))
		return KeyedSum(mac)
	}
}

// Keyed baselines. The daemon stores a baseline for days; under an active
// redaction policy it must not keep the hidden values in clear. KeyBaseline
// replaces each hidden value by a keyed token of its canonical JSON, and
// Restorer.Restore puts back, before judging, every token whose value the
// judge can still compare against: a value read after the action (in any
// hidden field) or a value with the same canonical text as a hidden-field
// selector value. A token left in place stands for a value equal to nothing
// the judge compares it with, and a token is equal to nothing either, so
// every identity, selector and whole-record comparison, and so the verdict,
// is exactly what the clear baseline would give.

// Keyer makes the keyed tokens of values. It remembers the tokens it made
// (up to a bound), so that re-reading the same values while a verdict
// settles costs a map lookup. A Keyer is not safe for concurrent use.
type Keyer struct {
	mac   hash.Hash
	cache map[string]string
}

// keyerCache bounds the tokens a Keyer remembers.
const keyerCache = 1 << 17

// NewKeyer returns a Keyer for key.
func NewKeyer(key []byte) *Keyer {
	return &Keyer{mac: NewKeyedHash(key), cache: map[string]string{}}
}

// token is the keyed token of one value: equal values (by canonical JSON)
// share a token, and nothing else does.
func (k *Keyer) token(v any) string {
	return k.tokenOfJSON(CanonicalJSON(v))
}

func (k *Keyer) tokenOfJSON(canonical string) string {
	if t, ok := k.cache[canonical]; ok {
		return t
	}
	k.mac.Reset()
	k.mac.Write([]byte("verifierd baseline value\x00"))
	k.mac.Write([]byte(canonical))
	t := KeyedSum(k.mac)
	if len(k.cache) < keyerCache {
		k.cache[canonical] = t
	}
	return t
}

// KeyBaseline returns r with every non-null value of a field p hides
// replaced by its keyed token. Under an inactive policy r is returned as is.
func (p Redaction) KeyBaseline(k *Keyer, r Record) Record {
	if !p.Active() {
		return r
	}
	out := make(Record, len(r))
	for f, v := range r {
		if v != nil && p.redacts(f) {
			out[f] = k.token(v)
		} else {
			out[f] = v
		}
	}
	return out
}

// Restorer puts the clear values back into a keyed baseline.
type Restorer struct {
	p      Redaction
	tokens map[string]any
}

// NewRestorer collects the values a keyed baseline can be restored from:
// the hidden fields' values in the after read, and the selector values of
// hidden fields in contracts, in every type whose canonical text they have.
func (p Redaction) NewRestorer(k *Keyer, contracts []*Contract, after []Record) *Restorer {
	rs := &Restorer{p: p, tokens: map[string]any{}}
	if !p.Active() {
		return rs
	}
	add := func(v any) { rs.tokens[k.token(v)] = v }
	addText := func(text string) {
		add(text)
		// The same text as another JSON type (1, true, {"a":1}): a
		// selector or an identity compares text, not type.
		if v, ok := nonStringJSON(text); ok {
			add(v)
		}
	}
	for _, r := range after {
		for f, v := range r {
			if v == nil || !p.redacts(f) {
				continue
			}
			if s, isStr := v.(string); isStr {
				addText(s)
			} else if text, ok := Canon(v); ok {
				add(v)
				add(text)
			} else {
				add(v)
			}
		}
	}
	for _, c := range contracts {
		for _, pr := range c.Match {
			if p.redacts(pr.Field) {
				addText(pr.Value)
			}
		}
	}
	return rs
}

// Restore returns the baseline with every token it knows replaced by a
// value of the same canonical JSON as the one keyed at Begin.
func (rs *Restorer) Restore(before []Record) []Record {
	if !rs.p.Active() {
		return before
	}
	out := make([]Record, len(before))
	for i, r := range before {
		cp := make(Record, len(r))
		for f, v := range r {
			if s, ok := v.(string); ok && rs.p.redacts(f) && strings.HasPrefix(s, KeyedPrefix) {
				if clear, known := rs.tokens[s]; known {
					v = clear
				}
			}
			cp[f] = v
		}
		out[i] = cp
	}
	return out
}

// nonStringJSON returns the number, boolean, object or array whose
// canonical text is exactly text, if there is one.
func nonStringJSON(text string) (any, bool) {
	if text == "" || !strings.ContainsRune("-0123456789tf{[", rune(text[0])) {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() || v == nil {
		return nil, false
	}
	if _, isStr := v.(string); isStr {
		return nil, false
	}
	if s, ok := Canon(v); !ok || s != text {
		return nil, false
	}
	return v, true
}

// KeyID names a key without revealing it, so that a keyed baseline is
// never restored with another key.
func KeyID(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("verifierd evidence key id"))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// MinHiddenText is the shortest hidden value RedactText searches for:
// single characters are not searched, or every message would lose its
// letters and digits to a one-character field.
const MinHiddenText = 2

// RedactText masks, in text an adapter supplied (a capture failure, a
// Verdict-hook message, an error), every value that p hides: the hidden
// fields' values in the given reads and the values contracts give for
// hidden fields. Each occurrence becomes RedactedMarker, longest value
// first, in one pass, so a marker is never itself searched.
func (p Redaction) RedactText(text string, contracts []*Contract, reads ...[]Record) string {
	if !p.Active() || text == "" {
		return text
	}
	found := map[string]bool{}
	consider := func(s string) {
		if len(s) < MinHiddenText {
			return
		}
		// As written, and as a URL path or query would carry it (a
		// compensator's DELETE target, an HTTP adapter's error).
		for _, form := range []string{s, url.PathEscape(s), url.QueryEscape(s)} {
			if !found[form] && strings.Contains(text, form) {
				found[form] = true
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
		case string:
			consider(x)
		case json.Number:
			consider(string(x))
			consider(compact.CanonNumber(string(x)))
		case map[string]any:
			consider(CanonicalJSON(x))
			for _, e := range x {
				walk(e)
			}
		case []any:
			consider(CanonicalJSON(x))
			for _, e := range x {
				walk(e)
			}
		default:
			if s, ok := Canon(x); ok {
				consider(s)
			}
		}
	}
	for _, recs := range reads {
		for _, r := range recs {
			for f, v := range r {
				if p.redacts(f) {
					walk(v)
				}
			}
		}
	}
	for _, c := range contracts {
		if c == nil {
			continue
		}
		for _, pr := range c.Match {
			if p.redacts(pr.Field) {
				consider(pr.Value)
			}
		}
		for _, sel := range c.NewRecords {
			for _, pr := range sel {
				if p.redacts(pr.Field) {
					consider(pr.Value)
				}
			}
		}
		if c.Value != nil && p.redacts(c.Field) {
			consider(*c.Value)
		}
		if c.IdempotencyKey != nil && p.redacts(c.KeyField) {
			consider(*c.IdempotencyKey)
		}
	}
	if len(found) == 0 {
		return text
	}
	hidden := make([][]byte, 0, len(found))
	for s := range found {
		hidden = append(hidden, []byte(s))
	}
	var b strings.Builder
	src := []byte(text)
	for i := 0; i < len(src); {
		best := 0
		for _, h := range hidden {
			if len(h) > best && bytes.HasPrefix(src[i:], h) {
				best = len(h)
			}
		}
		if best > 0 {
			b.WriteString(RedactedMarker)
			i += best
			continue
		}
		b.WriteByte(src[i])
		i++
	}
	return b.String()
}

// maxKeyedText is the longest substring RedactKeyedText tries.
const maxKeyedText = 256

// Tokens returns the keyed tokens in the fields p hides of keyed baseline
// records: the values the daemon knows only by their token.
func (p Redaction) Tokens(keyed []Record) map[string]bool {
	out := map[string]bool{}
	for _, r := range keyed {
		for f, v := range r {
			if s, ok := v.(string); ok && p.redacts(f) && strings.HasPrefix(s, KeyedPrefix) {
				out[s] = true
			}
		}
	}
	return out
}

// RedactKeyedText masks in text every value known only by its keyed token
// (a baseline value no longer in clear anywhere): each substring of up to
// 256 bytes that does not cut through a word is keyed, as text and as the
// JSON number or boolean it spells, and masked when its token is in
// tokens. The longest match at each position wins.
func RedactKeyedText(k *Keyer, text string, tokens map[string]bool) string {
	if len(tokens) == 0 || text == "" {
		return text
	}
	word := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
	}
	startsAt := func(i int) bool { return i == 0 || !word(text[i-1]) || !word(text[i]) }
	endsAt := func(j int) bool { return j == len(text) || !word(text[j]) || !word(text[j-1]) }
	hit := func(s string) bool {
		if len(s) < MinHiddenText {
			return false
		}
		if tokens[k.token(s)] {
			return true
		}
		if strings.TrimSpace(s) != s || s[0] == '{' || s[0] == '[' {
			return false // JSON would skip the space and mask it too
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil || dec.More() {
			return false
		}
		switch v.(type) {
		case json.Number, bool:
			return tokens[k.token(v)]
		}
		return false
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		best := 0
		if startsAt(i) {
			for j := min(len(text), i+maxKeyedText); j > i+best; j-- {
				if endsAt(j) && hit(text[i:j]) {
					best = j - i
					break
				}
			}
		}
		if best > 0 {
			b.WriteString(RedactedMarker)
			i += best
			continue
		}
		b.WriteByte(text[i])
		i++
	}
	return b.String()
}

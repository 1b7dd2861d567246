package session

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/secretforms"
	"github.com/verifierd/verifierd/judge"
)

// SecretMarker replaces a configured secret's value wherever a read record
// or an adapter's text carries it.
const SecretMarker = secretforms.Marker

// secretMask holds the values of a candidate's configured secrets (the
// environment variables its *_env keys, secret_env and compensator name)
// and every form each takes in text (secretforms.Of: base64, URL-escaped, the
// password of a user:password pair, JSON-escaped, in any ASCII case), so
// that a system of record that echoes a credential inside a record (an
// Authorization header in an audit row, lower-cased or as Basic's base64)
// does not carry it into a verdict, a stored result, the store or a log.
// The judge is given the records as read; only what leaves it is masked.
// The values live in memory for one call and are never written, logged or
// hashed.
//
// A stored baseline keeps, in place of a form, a placeholder naming the
// secret's slot and the form ("[redacted:auth.value_env]",
// "[redacted:auth.basic_env~base64]"), which Verify replaces with the
// slot's current value in that form before judging (restoreRaw): the judge
// compares the baseline and the after read as they were read, and the
// store never holds the value.
type secretMask struct {
	secrets []secret
	m       *secretforms.Matcher
}

type secret struct{ slot, value string }

// secretMask resolves c's secret references in the daemon's environment.
// A variable that is unset or empty masks nothing.
func (m *Manager) secretMask(c *config.Candidate) secretMask { return maskSecrets(m.lookupEnv, c) }

// maskSecrets is the mask of c's secrets, resolved with lookupEnv.
func maskSecrets(lookupEnv func(string) (string, bool), c *config.Candidate) secretMask {
	if c == nil {
		return secretMask{}
	}
	var out []secret
	for _, refs := range []map[string]string{c.Secrets, c.CompensatorSecrets} {
		for _, slot := range slices.Sorted(maps.Keys(refs)) {
			v, ok := lookupEnv(refs[slot])
			if ok && v != "" {
				out = append(out, secret{slot: slot, value: v})
			}
		}
	}
	return newSecretMask(out)
}

// newSecretMask is the mask of secrets (a value named twice is masked
// under its first slot).
func newSecretMask(secrets []secret) secretMask {
	var out secretMask
	var forms []secretforms.Form
	for _, sec := range secrets {
		if !slices.ContainsFunc(out.secrets, func(s secret) bool { return s.value == sec.value }) {
			out.secrets = append(out.secrets, sec)
			forms = append(forms, secretforms.Of(sec.slot, sec.value)...)
		}
	}
	out.m = secretforms.NewMatcher(forms)
	return out
}

// joinMasks is one mask of the secrets of every mask in ms.
func joinMasks(ms ...secretMask) secretMask {
	var all []secret
	for _, m := range ms {
		all = append(all, m.secrets...)
	}
	return newSecretMask(all)
}

func (s secretMask) active() bool { return s.m != nil }

// text masks every form of every secret in t with SecretMarker.
func (s secretMask) text(t string) string {
	if !s.active() {
		return t
	}
	return s.m.Mask(t)
}

// stored masks every form of every secret in t with its placeholder.
func (s secretMask) stored(t string) string {
	if !s.active() {
		return t
	}
	return s.m.Replace(t, secretforms.Placeholder)
}

// value masks secrets inside a decoded JSON value (text replaces them):
// a string that contains one, at any depth, a key, and a number whose text
// does.
func (s secretMask) value(v any, text func(string) string) any {
	switch x := v.(type) {
	case string:
		return text(x)
	case json.Number:
		if t := text(string(x)); t != string(x) {
			return t
		}
		return x
	case map[string]any:
		return s.object(x, text)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.value(e, text)
		}
		return out
	}
	return v
}

// object applies text to every key and value of m, into a new map.
func (s secretMask) object(m map[string]any, text func(string) string) map[string]any {
	out := make(map[string]any, len(m))
	for k, e := range m {
		out[text(k)] = s.value(e, text)
	}
	return out
}

// record returns r with every secret masked (r itself is not changed).
func (s secretMask) record(r judge.Record) judge.Record {
	if !s.active() || r == nil {
		return r
	}
	return judge.Record(s.object(r, s.text))
}

func (s secretMask) records(rs []judge.Record) []judge.Record {
	if !s.active() || rs == nil {
		return rs
	}
	out := make([]judge.Record, len(rs))
	for i, r := range rs {
		out[i] = s.record(r)
	}
	return out
}

// storeRaw masks one record as the adapter sent it (JSON) for the store,
// each value by its slot's placeholder. A record that holds no secret, in
// clear or JSON-escaped, is returned as it is; one that does is decoded,
// masked and encoded again.
//
// A record that does not decode (Verify finds such a baseline unreadable)
// is stored with each value replaced in its bytes (storeBytes). A record
// that holds a form in a mix of cases (neither as configured, nor all
// lower or upper case) is refused with an *unrestorableError: its
// placeholder could not be put back, and a baseline record judged with a
// placeholder where the after read holds the value would look changed or
// new.
func (s secretMask) storeRaw(rec []byte) ([]byte, error) {
	if !s.active() || !s.mayHold(rec) {
		return rec, nil
	}
	r, err := decodeRecord(rec)
	if err != nil {
		return s.storeBytes(rec), nil //nolint:nilerr // an undecodable record is stored with its values replaced in its bytes
	}
	changed := false
	var mixed *secretforms.Form
	masked := s.object(r, func(t string) string {
		m := s.m.Replace(t, func(f *secretforms.Form, found string) string {
			p := secretforms.Placeholder(f, found)
			if secretforms.Mixed(p) {
				mixed = f
			}
			return p
		})
		changed = changed || m != t
		return m
	})
	if mixed != nil {
		return nil, &unrestorableError{slot: mixed.Slot}
	}
	if !changed {
		// Nothing decoded holds one (a duplicate key's earlier value may
		// still): the bytes as they came, with any value in them replaced.
		return s.storeBytes(rec), nil
	}
	return json.Marshal(masked)
}

// unrestorableError is a baseline record that echoes a secret in a mix of
// cases (secretMask.storeRaw).
type unrestorableError struct{ slot string }

func (e *unrestorableError) Error() string {
	return "a baseline record echoes the secret of " + e.slot + " in a mix of upper and lower case, which the stored baseline could not put back for the comparison; " +
		"the session is refused rather than judged against a record that would look changed (have the system of record stop echoing the credential, or read fields that do not carry it)"
}

// storeBytes replaces each form in rec's bytes, in clear and as JSON
// encodes it, by its placeholder.
func (s secretMask) storeBytes(rec []byte) []byte {
	if !s.m.Contains(rec) {
		return rec
	}
	return []byte(s.stored(string(rec)))
}

// restoreRaw puts each slot's current value, in the form a placeholder
// names, back where a stored record (JSON, or a baseline index entry: a
// mark byte and JSON) holds the placeholder, JSON-escaped. A placeholder
// of a slot the candidate no longer has, or of a form found in a mix of
// cases, stays as it is.
func (s secretMask) restoreRaw(rec []byte) []byte {
	if !s.active() || !bytes.Contains(rec, []byte("[redacted:")) {
		return rec
	}
	return []byte(s.restore(string(rec), func(t string) string {
		enc, _ := json.Marshal(t)
		return string(enc[1 : len(enc)-1])
	}))
}

// restoreText puts each slot's current value, in the form a placeholder
// names, back where t holds the placeholder.
func (s secretMask) restoreText(t string) string {
	if !s.active() || !strings.Contains(t, "[redacted:") {
		return t
	}
	return s.restore(t, func(t string) string { return t })
}

// restore replaces each placeholder in t by its form's text, written
// with as.
func (s secretMask) restore(t string, as func(string) string) string {
	for _, f := range s.m.Forms() {
		for _, p := range f.Restorable() {
			if strings.Contains(t, p[0]) {
				t = strings.ReplaceAll(t, p[0], as(p[1]))
			}
		}
	}
	return t
}

// mayHold reports whether rec's bytes contain a form of a secret. Anything
// else decoded from rec (a \u escape a JSON encoder would not write) is
// also checked: a record whose bytes hold a backslash is decoded and
// searched.
func (s secretMask) mayHold(rec []byte) bool {
	return bytes.IndexByte(rec, '\\') >= 0 || s.m.Contains(rec)
}

// verdict masks the values a verdict shows: its matched records, its
// observed and expected values and its reason messages. The decision,
// class, counts and codes are v's.
func (s secretMask) verdict(v judge.Verdict) judge.Verdict {
	if !s.active() {
		return v
	}
	out := v
	out.Matched = s.records(v.Matched)
	if v.ObservedValue != nil {
		t := s.text(*v.ObservedValue)
		out.ObservedValue = &t
	}
	if v.ExpectedValue != nil {
		t := s.text(*v.ExpectedValue)
		out.ExpectedValue = &t
	}
	if v.Reasons != nil {
		out.Reasons = make([]judge.Reason, len(v.Reasons))
		for i, r := range v.Reasons {
			out.Reasons[i] = judge.Reason{Code: r.Code, Message: s.text(r.Message)}
		}
	}
	return out
}

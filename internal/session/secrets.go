package session

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
)

// SecretMarker replaces a configured secret's value wherever a read record
// or an adapter's text carries it.
const SecretMarker = "[redacted]"

// secretMask holds the values of a candidate's configured secrets (the
// environment variables its *_env keys, secret_env and compensator name),
// longest first, so that a system of record that echoes a credential inside
// a record (an Authorization header in an audit row) does not carry it into
// a verdict, a stored result, the store or a log. The judge is given the
// records as read; only what leaves it is masked. The values live in memory
// for one call and are never written, logged or hashed.
//
// A stored baseline keeps, in place of a value, a placeholder naming the
// secret's slot ("[redacted:auth.value_env]"), which Verify replaces with
// the slot's current value before judging (restoreRaw): the judge compares
// the baseline and the after read as they were read, and the store never
// holds the value.
type secretMask struct{ secrets []secret }

type secret struct{ slot, value string }

// secretMask resolves c's secret references in the daemon's environment.
// A variable that is unset or empty masks nothing.
func (m *Manager) secretMask(c *config.Candidate) secretMask { return maskSecrets(m.lookupEnv, c) }

// maskSecrets is the mask of c's secrets, resolved with lookupEnv.
func maskSecrets(lookupEnv func(string) (string, bool), c *config.Candidate) secretMask {
	if c == nil {
		return secretMask{}
	}
	var out secretMask
	for _, refs := range []map[string]string{c.Secrets, c.CompensatorSecrets} {
		for _, slot := range slices.Sorted(maps.Keys(refs)) {
			v, ok := lookupEnv(refs[slot])
			if ok && v != "" && !slices.ContainsFunc(out.secrets, func(s secret) bool { return s.value == v }) {
				out.secrets = append(out.secrets, secret{slot: slot, value: v})
			}
		}
	}
	out.sort()
	return out
}

// sort puts the longest value first: a secret that contains another is
// masked whole.
func (s secretMask) sort() {
	slices.SortStableFunc(s.secrets, func(a, b secret) int { return len(b.value) - len(a.value) })
}

func (s secretMask) active() bool { return len(s.secrets) > 0 }

// text masks every secret value in t.
func (s secretMask) text(t string) string {
	return s.replace(t, func(secret) string { return SecretMarker })
}

func (s secretMask) replace(t string, with func(secret) string) string {
	for _, sec := range s.secrets {
		if strings.Contains(t, sec.value) {
			t = strings.ReplaceAll(t, sec.value, with(sec))
		}
	}
	return t
}

// placeholder is what a stored baseline holds in place of sec's value.
func placeholder(sec secret) string { return "[redacted:" + sec.slot + "]" }

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
// is stored with each value replaced in its bytes (storeBytes).
func (s secretMask) storeRaw(rec []byte) ([]byte, error) {
	if !s.active() || !s.mayHold(rec) {
		return rec, nil
	}
	r, err := decodeRecord(rec)
	if err != nil {
		return s.storeBytes(rec), nil //nolint:nilerr // an undecodable record is stored with its values replaced in its bytes
	}
	changed := false
	masked := s.object(r, func(t string) string {
		return s.replace(t, func(sec secret) string { changed = true; return placeholder(sec) })
	})
	if !changed {
		// Nothing decoded holds one (a duplicate key's earlier value may
		// still): the bytes as they came, with any value in them replaced.
		return s.storeBytes(rec), nil
	}
	return json.Marshal(masked)
}

// storeBytes replaces each value in rec's bytes, in clear and as JSON
// encodes it, by its placeholder.
func (s secretMask) storeBytes(rec []byte) []byte {
	for _, sec := range s.secrets {
		enc, _ := json.Marshal(sec.value)
		for _, form := range [][]byte{[]byte(sec.value), enc[1 : len(enc)-1]} {
			if bytes.Contains(rec, form) {
				rec = bytes.ReplaceAll(rec, form, []byte(placeholder(sec)))
			}
		}
	}
	return rec
}

// restoreRaw puts each slot's current value back where a stored record
// (JSON, or a baseline index entry: a mark byte and JSON) holds its
// placeholder, JSON-escaped. A placeholder of a slot the candidate no
// longer has stays as it is.
func (s secretMask) restoreRaw(rec []byte) []byte {
	if !s.active() || !bytes.Contains(rec, []byte("[redacted:")) {
		return rec
	}
	for _, sec := range s.secrets {
		enc, _ := json.Marshal(sec.value)
		rec = bytes.ReplaceAll(rec, []byte(placeholder(sec)), enc[1:len(enc)-1])
	}
	return rec
}

// restoreText puts each slot's current value back where t holds its
// placeholder.
func (s secretMask) restoreText(t string) string {
	if !strings.Contains(t, "[redacted:") {
		return t
	}
	for _, sec := range s.secrets {
		t = strings.ReplaceAll(t, placeholder(sec), sec.value)
	}
	return t
}

// mayHold reports whether rec's bytes contain a secret in clear or as JSON
// encodes it. Anything else decoded from rec (a \u escape a JSON encoder
// would not write) is also checked: a record whose bytes hold a backslash
// is decoded and searched.
func (s secretMask) mayHold(rec []byte) bool {
	if bytes.IndexByte(rec, '\\') >= 0 {
		return true
	}
	for _, sec := range s.secrets {
		if bytes.Contains(rec, []byte(sec.value)) {
			return true
		}
		enc, _ := json.Marshal(sec.value)
		if bytes.Contains(rec, enc[1:len(enc)-1]) {
			return true
		}
	}
	return false
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

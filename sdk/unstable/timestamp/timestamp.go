// Package timestamp is the one reading of a record's timestamp that
// verifierd uses: the daemon's judge checks a freshness window with Parse,
// and the qualification kit (sdk/adaptertest) runs the same Parse on the
// stale row an adapter reads back. An adapter whose records carry a
// timestamp in a shape Parse refuses (say LDAP's generalized time,
// 20000101000000Z) must convert it, because the judge would report every
// such record as having no timestamp.
//
// Accepted shapes: epoch seconds (a JSON number, an int, int64 or float64,
// or a string of digits with an optional fraction and sign), and RFC 3339 /
// ISO 8601 text: a date (2006-01-02), a date and a time to the minute or
// the second with an optional fraction, a 'T', 't' or space between them,
// and a zone written Z, z, +07:00, +0700 or +07 (none means UTC).
//
// The package imports only the standard library and the SDK's own
// naming of a value's type (the words param refuses a value with).
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package timestamp

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk/internal/typename"
)

// layouts are the ISO 8601 / RFC 3339 shapes accepted, after a space or
// lowercase t separator is normalised to T and a lowercase z to Z. A
// layout without a zone reads as UTC.
var layouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999Z07",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// MaxEpochSeconds bounds epoch seconds (about the year 5138): a larger
// number is a milliseconds or microseconds count written where seconds
// belong, and is refused rather than read as a date far in the future.
const MaxEpochSeconds = 1e11

// Parse reads a record value as a timestamp, in UTC. v is a record value
// as an adapter yields it or the judge decodes it: nil, a string, a
// json.Number, an int, an int64 or a float64; anything else is refused.
func Parse(v any) (time.Time, error) {
	switch x := v.(type) {
	case nil:
		return time.Time{}, fmt.Errorf("no timestamp")
	case json.Number:
		return epoch(string(x))
	case float64:
		return epochFloat(x)
	case int64:
		return time.Unix(x, 0).UTC(), nil
	case int:
		return time.Unix(int64(x), 0).UTC(), nil
	case string:
		return parseText(x)
	}
	return time.Time{}, fmt.Errorf("%s is not a timestamp", typename.Of(v))
}

func parseText(x string) (time.Time, error) {
	s := strings.TrimSpace(x)
	if t, err := epoch(s); err == nil {
		return t, nil
	}
	if len(s) > 10 && (s[10] == ' ' || s[10] == 't') {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither epoch seconds nor an RFC 3339 / ISO 8601 timestamp", x)
}

func epoch(s string) (time.Time, error) {
	if s == "" || strings.ContainsAny(s, "aAbBcCdDfFiInNoOsStTuUxXyY_") {
		return time.Time{}, fmt.Errorf("not epoch seconds")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, err
	}
	return epochFloat(f)
}

func epochFloat(f float64) (time.Time, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > MaxEpochSeconds {
		return time.Time{}, fmt.Errorf("epoch seconds %g out of range", f)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
}

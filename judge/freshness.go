package judge

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk/param"
)

// applyFreshness demotes a CONFIRMED verdict to INDETERMINATE (stale) when a
// matched record's timestamp is missing, unparseable, older than the window,
// or further than the window in the future. An age exactly equal to the
// window is still fresh.
func applyFreshness(v *Verdict, f *Freshness) {
	for _, r := range v.Matched {
		ts, err := ParseTimestamp(r[f.Field])
		var problem string
		if err != nil {
			// The message names the field, never its value: the field may
			// be redacted.
			problem = fmt.Sprintf("a matched record's %q is not a timestamp (epoch seconds or RFC 3339), so its freshness cannot be shown", f.Field)
		} else if age := secondsBetween(ts, f.Now); age > f.WindowS {
			problem = fmt.Sprintf("a matched record's %q is %.3fs old, beyond the %gs freshness window", f.Field, age, f.WindowS)
		} else if -age > f.WindowS {
			problem = fmt.Sprintf("a matched record's %q is %.3fs in the future, beyond the %gs freshness window", f.Field, -age, f.WindowS)
		} else {
			continue
		}
		v.Decision = Indeterminate
		v.Stale = true
		v.ObservedCount = nil
		v.ExpectedCount = nil
		v.Reasons = []Reason{{Code: ReasonStale, Message: problem}}
		return
	}
}

// secondsBetween returns now - ts in seconds without time.Duration, which
// saturates at about 292 years and would make a wide window meaningless.
func secondsBetween(ts, now time.Time) float64 {
	return float64(now.Unix()-ts.Unix()) + float64(now.Nanosecond()-ts.Nanosecond())/1e9
}

// timestampLayouts are the ISO 8601 / RFC 3339 shapes accepted, after a
// space or lowercase t separator is normalised to T and a lowercase z to Z.
// A layout without a zone reads as UTC.
var timestampLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999Z07",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// ParseTimestamp reads a freshness timestamp: epoch seconds (a number or a
// numeric string) or RFC 3339 / ISO 8601 text ("Z" or an offset; none means
// UTC).
func ParseTimestamp(v any) (time.Time, error) {
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
		for _, layout := range timestampLayouts {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC(), nil
			}
		}
		return time.Time{}, fmt.Errorf("%q is neither epoch seconds nor an RFC 3339 / ISO 8601 timestamp", x)
	}
	return time.Time{}, fmt.Errorf("a %s is not a timestamp", param.TypeName(v))
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
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return time.Time{}, fmt.Errorf("epoch seconds %g out of range", f)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
}

package judge

import (
	"fmt"
	"time"

	"github.com/verifierd/verifierd/sdk/unstable/timestamp"
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

// ParseTimestamp reads a freshness timestamp: epoch seconds (a number or a
// numeric string) or RFC 3339 / ISO 8601 text ("Z" or an offset; none means
// UTC). It is sdk/unstable/timestamp's Parse, which the qualification kit runs on an
// adapter's stale row, so an adapter is held to the reading the judge makes.
func ParseTimestamp(v any) (time.Time, error) { return timestamp.Parse(v) }

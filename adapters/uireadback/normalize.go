package uireadback

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// collapseSpace trims a value and collapses every run of whitespace
// (Unicode, non-breaking spaces included) into one space, as an HTML page
// renders it. A whitespace-only difference is therefore invisible to the
// read-back.
func collapseSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// strftime directives and the Go layout element each one becomes.
var strftime = map[byte]string{
	'Y': "2006", 'y': "06", 'm': "01", 'd': "02", 'e': "_2", 'j': "002",
	'H': "15", 'I': "03", 'M': "04", 'S': "05", 'p': "PM",
	'b': "Jan", 'h': "Jan", 'B': "January", 'a': "Mon", 'A': "Monday",
	'z': "-0700", 'Z': "MST", 'F': "2006-01-02", 'T': "15:04:05", 'D': "01/02/06",
}

// strftimeNoPad are the %-x forms (no padding) that Go can parse.
var strftimeNoPad = map[byte]string{'m': "1", 'd': "2", 'H': "15", 'I': "3", 'M': "4", 'S': "5"}

// dateLayout turns a date_format into a Go layout and picks the ISO 8601
// layout the parsed value is written in: a date (2006-01-02), a local date
// and time (2006-01-02T15:04:05), or, when the format reads a zone, RFC 3339.
// A format with a % is strftime-like (%d/%m/%Y); any other is a Go layout
// (02/01/2006).
func dateLayout(format string) (layout, iso string, err error) {
	layout = format
	if strings.Contains(format, "%") {
		var b, lit strings.Builder
		flush := func() error {
			if err := checkLiteral(lit.String()); err != nil {
				return fmt.Errorf("%q: %v", format, err)
			}
			b.WriteString(lit.String())
			lit.Reset()
			return nil
		}
		for i := 0; i < len(format); i++ {
			c := format[i]
			if c != '%' {
				lit.WriteByte(c)
				continue
			}
			if i+1 >= len(format) {
				return "", "", fmt.Errorf("%q ends with a lone %%", format)
			}
			i++
			d := format[i]
			if d == '%' {
				lit.WriteByte('%')
				continue
			}
			if err := flush(); err != nil {
				return "", "", err
			}
			switch {
			case d == '-' && i+1 < len(format) && strftimeNoPad[format[i+1]] != "":
				i++
				b.WriteString(strftimeNoPad[format[i]])
			case strftime[d] != "":
				b.WriteString(strftime[d])
			default:
				return "", "", fmt.Errorf("%q: %%%c is not supported; use %%Y %%y %%m %%d %%e %%j %%H %%I %%M %%S %%p %%b %%B %%a %%A %%z %%Z %%F %%T %%D (or %%-m %%-d %%-H %%-I %%-M %%-S), or write a Go layout such as 02/01/2006", format, d)
			}
		}
		if err := flush(); err != nil {
			return "", "", err
		}
		layout = b.String()
	}

	// Find what the layout reads by writing a reference instant with it and
	// reading it back.
	zone := time.FixedZone("UTC+0530", 5*3600+30*60)
	ref := time.Date(2031, time.November, 23, 13, 45, 57, 0, zone)
	back, perr := time.Parse(layout, ref.Format(layout))
	if perr != nil || back.Year() != ref.Year() || back.Month() != ref.Month() || back.Day() != ref.Day() {
		return "", "", fmt.Errorf("%q does not read a year, a month and a day; write e.g. %%d/%%m/%%Y or the Go layout 02/01/2006", format)
	}
	_, offset := back.Zone()
	switch {
	case offset == 5*3600+30*60:
		iso = time.RFC3339
	case back.Hour() == ref.Hour() && back.Minute() == ref.Minute():
		iso = "2006-01-02T15:04:05"
	case back.Hour() != 0 || back.Minute() != 0:
		return "", "", fmt.Errorf("%q reads the hour without the minutes (or the reverse); read both or neither", format)
	default:
		iso = "2006-01-02"
	}
	return layout, iso, nil
}

// goLayoutWords are literal texts that a Go layout would read as a date
// element.
var goLayoutWords = []string{"Jan", "Mon", "MST", "PM", "pm", "Z0", "_2"}

// checkLiteral refuses strftime literal text that the Go layout it becomes
// would misread as a date element: a digit, or a word such as Jan or PM.
func checkLiteral(lit string) error {
	for _, r := range lit {
		if r >= '0' && r <= '9' {
			return fmt.Errorf("the literal text %q has a digit, which the date parser would read as part of the date", lit)
		}
	}
	for _, w := range goLayoutWords {
		if strings.Contains(lit, w) {
			return fmt.Errorf("the literal text %q contains %q, which the date parser would read as part of the date", lit, w)
		}
	}
	return nil
}

// spellings are the values a contract of this read can expect, as the
// contracts spell them. A daemon that sends the contracts' values
// (CaptureRequest.ExpectedValues: every match value, a field_equals value,
// an idempotency key, exact_new_set's members, parameters bound, by field)
// gives them all, literals included. From an older daemon they are the
// contract's match (CaptureRequest.Selector, sent when one contract is
// read) and the run's parameters, which miss a literal the contract writes
// itself. The page's values are normalised (their whitespace collapsed,
// dates in ISO 8601, casefolded) and the judge compares exact text, so a
// value read is reported in the spelling the contract expects whenever
// that spelling, normalised the same way, is the value read: the
// normalisation then holds on both sides, and a save whose only difference
// from the contract's value is one the page cannot show (two spaces, a
// date's display format, capitals) is not refuted for it.
type spellings struct {
	selector map[string]string
	params   map[string]string
	// daemon: the daemon sent the contracts' read fields, and with them
	// expected (nil when no contract compares a value): the contracts'
	// values are then the only spellings.
	daemon   bool
	expected map[string][]string
}

// candidates maps each normalised form (norm) of the run's parameters, and
// of extra, to the distinct spellings that have it.
func (sp spellings) candidates(norm func(string) string, extra ...string) map[string][]string {
	out := map[string][]string{}
	add := func(e string) {
		n := norm(e)
		if !slices.Contains(out[n], e) {
			out[n] = append(out[n], e)
		}
	}
	for _, e := range sp.params {
		add(e)
	}
	for _, e := range extra {
		add(e)
	}
	return out
}

// of is field name's value read (normalised: read) in the spelling a
// contract expects. When the daemon sent the contracts' values, the one
// among the field's that normalises (norm) to read, else read as it is.
// From an older daemon: the contract's own match value for the field when
// it normalises to read; else the one spelling among cands (candidates)
// that normalises to read; else, with none or with several that disagree,
// read as it is.
func (sp spellings) of(name, read string, norm func(string) string, cands map[string][]string) string {
	if sp.daemon {
		// The one value the contracts compare the field with that
		// normalises to read; none, or several that differ, leave it.
		var one []string
		for _, e := range sp.expected[name] {
			if norm(e) == read && !slices.Contains(one, e) {
				one = append(one, e)
			}
		}
		if len(one) == 1 {
			return one[0]
		}
		return read
	}
	if e, ok := sp.selector[name]; ok && norm(e) == read {
		return e
	}
	if c := cands[read]; len(c) == 1 {
		return c[0]
	}
	return read
}

// readFields is the set of record fields a contract of this read looks at
// (sdk.CaptureRequest.ReadFields), or nil, which checks every field: when
// the daemon sends no list (an older daemon), and when a contract reads a
// field the page's records do not carry. The latter is the safe answer to
// a record without its identity field, which the judge tells apart from
// the others by all of its fields.
func readFields(s *settings, fields []string) map[string]bool {
	if len(fields) == 0 {
		return nil
	}
	out := make(map[string]bool, len(fields))
	for _, name := range fields {
		known := name == s.identity.field && name != ""
		for _, f := range s.fields {
			known = known || f.name == name
		}
		if !known {
			return nil
		}
		out[name] = true
	}
	return out
}

// checks reports whether the checks that protect only field name's value
// apply to it: whether a contract of this read looks at it.
func (s *settings) checks(name string) bool {
	return s.read == nil || s.read[name]
}

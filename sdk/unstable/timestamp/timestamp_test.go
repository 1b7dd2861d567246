package timestamp

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   any
		ok   bool
	}{
		{"json number", json.Number("1767268800"), true},
		{"json number fraction zero", json.Number("1767268800.0"), true},
		{"float64", 1767268800.0, true},
		{"int", 1767268800, true},
		{"int64", int64(1767268800), true},
		{"numeric string", "1767268800", true},
		{"numeric string padded", " 1767268800 ", true},
		{"Z", "2026-01-01T12:00:00Z", true},
		{"lowercase z", "2026-01-01T12:00:00z", true},
		{"offset", "2026-01-01T14:00:00+02:00", true},
		{"negative offset", "2026-01-01T07:00:00-05:00", true},
		{"offset no colon", "2026-01-01T14:00:00+0200", true},
		{"offset hours only", "2026-01-01T14:00:00+02", true},
		{"no offset", "2026-01-01T12:00:00", true},
		{"minutes only", "2026-01-01T12:00", true},
		{"space separator", "2026-01-01 12:00:00Z", true},
		{"fraction", "2026-01-01T12:00:00.000Z", true},
		// LDAP's generalized time and other compact forms are refused:
		// an adapter converts them before yielding the record.
		{"generalized time", "20260101120000Z", false},
		{"milliseconds", json.Number("1767268800000"), false},
		{"garbage", "noon", false},
		{"empty", "", false},
		{"nil", nil, false},
		{"bool", true, false},
		{"object", map[string]any{}, false},
		{"NaN string", "NaN", false},
		{"Inf string", "Inf", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("Parse(%#v) = %v, %v; want ok=%v", tc.in, got, err, tc.ok)
			}
			if tc.ok && !got.Equal(want) {
				t.Errorf("Parse(%#v) = %v, want %v", tc.in, got, want)
			}
		})
	}
	if _, err := Parse(true); err == nil || err.Error() != "a boolean is not a timestamp" {
		t.Errorf("Parse(true) error = %v; want it to name the type", err)
	}
}

// FuzzParse: Parse never panics, and whatever it accepts is UTC.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"2026-01-01T12:00:00Z", "1767268800", "20000101000000Z", " 1e10 ", "2026-01-01 12:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err == nil && got.Location() != time.UTC {
			t.Fatalf("Parse(%q) = %v, not in UTC", s, got)
		}
	})
}

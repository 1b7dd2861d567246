package jsonnum

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		s       string
		i       int
		want    Number
		wantErr error
	}{
		"zero":                    {s: "0", want: Number{0, 1, 1, 1}},
		"integer":                 {s: "-120", want: Number{0, 4, 4, 4}},
		"fraction":                {s: "42.50", want: Number{0, 2, 5, 5}},
		"exponent":                {s: "1E+3", want: Number{0, 1, 1, 4}},
		"all parts":               {s: "-1.5e-07", want: Number{0, 2, 4, 8}},
		"stops at what follows":   {s: `[7.25,"x"]`, i: 1, want: Number{1, 2, 5, 5}},
		"a leading zero ends it":  {s: "01", want: Number{0, 1, 1, 1}},
		"a second point ends it":  {s: "1.5.3", want: Number{0, 1, 3, 3}},
		"an exponent ends it":     {s: "2e5e", want: Number{0, 1, 1, 3}},
		"empty":                   {s: "", wantErr: ErrNotNumber},
		"minus alone":             {s: "-", wantErr: ErrNotNumber},
		"plus":                    {s: "+1", wantErr: ErrNotNumber},
		"no integer part":         {s: ".5", wantErr: ErrNotNumber},
		"minus then point":        {s: "-.5", wantErr: ErrNotNumber},
		"point with no digits":    {s: "1.", wantErr: ErrFraction},
		"point then exponent":     {s: "1.e3", wantErr: ErrFraction},
		"exponent with no digits": {s: "1e", wantErr: ErrExponent},
		"signed empty exponent":   {s: "1e+", wantErr: ErrExponent},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Scan(tt.s, tt.i)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Scan(%q, %d) error %v, want %v", tt.s, tt.i, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("Scan(%q, %d) = %+v, want %+v", tt.s, tt.i, got, tt.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "-0", "7", "-7", "0.5", "12.000", "1e9", "1E-9", "-0.0e+0", "12345678901234567890.5"} {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "-", "+1", "01", "-01", ".5", "1.", "1e", "1e+", "1 ", " 1", "0x10", "NaN", "Infinity", "1_000", "1.5.3"} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

// FuzzValid holds Valid to encoding/json's reading of a lone number and
// Scan's parts to their definitions.
func FuzzValid(f *testing.F) {
	for _, s := range []string{"0", "-1.5e-07", "01", "1.", ".5", "+1", "1e+", "12345678901234567890.5", "1.5.3", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lone := s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && s == strings.TrimSpace(s)
		if want := lone && json.Valid([]byte(s)); Valid(s) != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", s, !want, want)
		}
		n, err := Scan(s, 0)
		if err != nil {
			return
		}
		if n.Start > n.Frac || n.Frac > n.Exp || n.Exp > n.End || n.End > len(s) {
			t.Fatalf("Scan(%q) = %+v: parts out of order", s, n)
		}
		text := s[n.Start:n.End]
		if !Valid(text) {
			t.Fatalf("Scan(%q) read %q, which is not Valid", s, text)
		}
		if frac := s[n.Frac:n.Exp]; frac != "" && (frac[0] != '.' || strings.ContainsAny(frac, "eE")) {
			t.Fatalf("Scan(%q): fraction %q", s, frac)
		}
		if exp := s[n.Exp:n.End]; exp != "" && exp[0] != 'e' && exp[0] != 'E' {
			t.Fatalf("Scan(%q): exponent %q", s, exp)
		}
		if n.Integer() != !strings.ContainsAny(text, ".eE") {
			t.Fatalf("Scan(%q): Integer() = %v for %q", s, n.Integer(), text)
		}
		if _, err := strconv.ParseFloat(text, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			t.Fatalf("Scan(%q) read %q, which strconv refuses: %v", s, text, err)
		}
	})
}

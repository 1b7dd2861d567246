package secretforms

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// Of's parts: the password of a basic_env pair and the credential after a
// scheme word are forms of their own from MinBytes on, never shorter.
func TestOfParts(t *testing.T) {
	t.Parallel()
	has := func(forms []Form, text string) bool {
		for _, f := range forms {
			if f.Text() == text {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		slot, value, part string
		want              bool
	}{
		{"auth.basic_env", "alice:Pa55w0rd-x", "Pa55w0rd-x", true},
		{"auth.basic_env", "alice:short", "short", false},
		{"secret_env.pair", "alice:Pa55w0rd-x", "Pa55w0rd-x", false}, // not a basic_env slot
		{"auth.value_env", "token key1:secret99", "key1:secret99", true},
		{"auth.value_env", "Bearer abc", "abc", false},
	} {
		forms := Of(tc.slot, tc.value)
		if got := has(forms, tc.part); got != tc.want {
			t.Errorf("Of(%s, %q) holds %q: %v, want %v", tc.slot, tc.value, tc.part, got, tc.want)
		}
		if tc.want && !has(forms, base64.StdEncoding.EncodeToString([]byte(tc.part))) {
			t.Errorf("Of(%s, %q) lacks the base64 of %q", tc.slot, tc.value, tc.part)
		}
		if !has(forms, tc.value) {
			t.Errorf("Of(%s, %q) lacks the value", tc.slot, tc.value)
		}
	}
}

// A Matcher takes the leftmost, then longest form, in any ASCII case,
// keeps markers, works with forms shorter than its 8-byte window, and
// leaves text without a form as it is.
func TestMatcher(t *testing.T) {
	t.Parallel()
	m := NewMatcher(append(Of("a", "abc"), Of("b", "abcdefghij")...))
	for in, want := range map[string]string{
		"xx ABCDEFGHIJ yy abc":              "xx [redacted] yy [redacted]",
		"abcabc":                            "[redacted][redacted]",
		"ab":                                "ab",
		"[redacted] [REDACTED:a] abc":       "[redacted] [REDACTED:a] [redacted]",
		url.QueryEscape("abcdefghij") + "!": "[redacted]!",
		base64.RawURLEncoding.EncodeToString([]byte("abcdefghij")): "[redacted]",
	} {
		if got := m.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
	clean := "nothing to see here"
	if got := m.Mask(clean); got != clean || m.Contains([]byte(clean)) || !m.Contains([]byte("..ABC..")) || m.Contains([]byte("[redacted]")) {
		t.Errorf("clean text: %q", got)
	}
	var none *Matcher
	if none.Mask("abc") != "abc" || none.Contains([]byte("abc")) || NewMatcher(nil) != nil {
		t.Error("a nil Matcher found something")
	}
	if strings.Contains(m.Mask(strings.Repeat("abcdefghij", 3)), "abc") {
		t.Error("repeated forms left a part")
	}
}

package host

import "testing"

func TestNegotiateAPIVersion(t *testing.T) {
	t.Parallel()
	if v, err := NegotiateAPIVersion([]string{"v9", "v2"}); err != nil || v != "v2" {
		t.Errorf("got %q, %v", v, err)
	}
	if _, err := NegotiateAPIVersion([]string{"v9"}); err == nil {
		t.Error("no common version was accepted")
	}
	if _, err := NegotiateAPIVersion(nil); err == nil {
		t.Error("an adapter listing no version was accepted")
	}
}

package refusal_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		r    *refusal.Error
		want string
	}{
		{refusal.New("", "", "bad"), "bad"},
		{refusal.New("INVALID_CONTRACT", "effects[0].match", "missing"), "effects[0].match: missing"},
	} {
		if got := tc.r.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestCodeOfWrapped(t *testing.T) {
	err := fmt.Errorf("loading: %w", refusal.New("secret_not_allowed", "candidates[0].secret_env.password", "not allowed"))
	if got := refusal.CodeOf(err); got != "secret_not_allowed" {
		t.Errorf("CodeOf = %q, want secret_not_allowed", got)
	}
	if got := refusal.CodeOf(fmt.Errorf("plain")); got != "" {
		t.Errorf("CodeOf(plain) = %q, want empty", got)
	}
}

func TestUnder(t *testing.T) {
	r := refusal.New("C", "path", "m")
	if got := r.Under("deployment.effects").Path; got != "deployment.effects.path" {
		t.Errorf("Under: %q", got)
	}
	if r.Path != "path" {
		t.Errorf("Under changed the refusal: %q", r.Path)
	}
	if got := refusal.New("", "", "m").Under("effects").Path; got != "effects" {
		t.Errorf("Under with no path: %q", got)
	}
	if got := r.Under("").Path; got != "path" {
		t.Errorf("Under(\"\"): %q", got)
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(refusal.New("UNBOUND_PARAM", "", "no value"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"code":"UNBOUND_PARAM","message":"no value"}` {
		t.Errorf("JSON %s", b)
	}
}

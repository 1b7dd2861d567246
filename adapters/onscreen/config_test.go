package onscreen

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func baseSection() map[string]any {
	return map[string]any{
		"kind": Kind,
		"onscreen": map[string]any{
			"screen": map[string]any{"cdp_url": "http://127.0.0.1:9222"},
			"renavigate": []any{
				map[string]any{"open": "https://app.example.org/records/{ref}?tab={tab}"},
				map[string]any{"wait": map[string]any{"selector": "#record"}},
			},
			"fields": []any{map[string]any{"param": "name", "region": []int{10, 10, 200, 40}}},
		},
	}
}

var baseParams = map[string]string{"ref": "r 1", "tab": "a&b", "name": "Ada"}

func configureSection(t *testing.T, sec map[string]any, secrets map[string]string) (*settings, error) {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := configured(sdk.ConfigureRequest{Kind: Kind, Config: raw, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	return s.bind(baseParams)
}

// configured configures a new adapter with req and returns the settings it
// stored.
func configured(req sdk.ConfigureRequest) (*settings, error) {
	a := New().(*Adapter)
	if err := a.Configure(context.Background(), req); err != nil {
		return nil, err
	}
	return a.Load()
}

// TestTierFromMechanism: the tier follows what the section makes the read
// do, and Info reports it after Configure.
func TestTierFromMechanism(t *testing.T) {
	s, err := configureSection(t, baseSection(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.tier != sdk.TierReacquiredState {
		t.Errorf("two re-navigation actions: tier %d; want 3", s.tier)
	}
	if got := s.actions[0].url; got != "https://app.example.org/records/r%201?tab=a%26b" {
		t.Errorf("open URL %q: the parameters are not escaped for their place", got)
	}
	sec := baseSection()
	delete(inner(sec), "renavigate")
	inner(sec)["same_surface"] = true
	a := New()
	if info := a.Info(); info.Tier != sdk.TierReacquiredState || !info.AbsenceNotProof {
		t.Errorf("unconfigured Info %+v; want tier 3 (the floor) and AbsenceNotProof", info)
	}
	raw, _ := json.Marshal(sec)
	if err := a.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: raw}); err != nil {
		t.Fatal(err)
	}
	if info := a.Info(); info.Tier != sdk.TierScreenConsistency {
		t.Errorf("same_surface: Info tier %d after Configure; want 4", info.Tier)
	}
}

// TestConfigureRefuses: each refusal names the path and says what to do.
func TestConfigureRefuses(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(m map[string]any)
		path    string
		message string
	}{
		{"no screen", func(m map[string]any) { delete(m, "screen") }, "onscreen.screen", "cdp_url"},
		{"x display with re-navigation", func(m map[string]any) { m["screen"] = map[string]any{"display": ":99"} }, "onscreen.renavigate", "never driven"},
		{"x display on another host", func(m map[string]any) { m["screen"] = map[string]any{"display": "host:0"} }, "onscreen.screen.display", "local X display"},
		{"x display and cdp", func(m map[string]any) { m["screen"] = map[string]any{"display": ":1", "cdp_url": "http://127.0.0.1:1"} }, "onscreen.screen", "one source"},
		{"both urls", func(m map[string]any) {
			m["screen"] = map[string]any{"cdp_url": "http://127.0.0.1:1", "cdp_url_env": "X"}
		}, "onscreen.screen", "not both"},
		{"env without secret", func(m map[string]any) { m["screen"] = map[string]any{"cdp_url_env": "APP_CDP"} }, "onscreen.screen.cdp_url_env", "APP_CDP"},
		{"bad cdp url", func(m map[string]any) { m["screen"] = map[string]any{"cdp_url": "file:///x"} }, "onscreen.screen", "http://"},
		{"no renavigation, no same_surface", func(m map[string]any) { delete(m, "renavigate") }, "onscreen.same_surface", "same_surface: true"},
		{"one action", func(m map[string]any) {
			m["renavigate"] = []any{map[string]any{"open": "https://app.example.org/r/{ref}"}}
		}, "onscreen.renavigate", "two actions"},
		{"renavigation and same_surface", func(m map[string]any) { m["same_surface"] = true }, "onscreen.same_surface", "remove"},
		{"renavigation not opening", func(m map[string]any) {
			m["renavigate"] = []any{map[string]any{"click": "#a"}, map[string]any{"wait": map[string]any{"text": "x"}}}
		}, "onscreen.renavigate[0]", "open"},
		{"two verbs in one action", func(m map[string]any) {
			m["renavigate"].([]any)[1] = map[string]any{"click": "#a", "wait": map[string]any{"text": "x"}}
		}, "onscreen.renavigate[1]", "exactly one"},
		{"parameter in the host", func(m map[string]any) {
			m["renavigate"].([]any)[0] = map[string]any{"open": "https://{ref}.example.org/x"}
		}, "onscreen.renavigate[0].open", "host"},
		{"unknown parameter", func(m map[string]any) {
			m["renavigate"].([]any)[0] = map[string]any{"open": "https://app.example.org/{nope}"}
		}, "onscreen.renavigate[0].open", "nope"},
		{"type unknown parameter", func(m map[string]any) {
			m["renavigate"].([]any)[1] = map[string]any{"type": map[string]any{"selector": "#q", "param": "nope"}}
		}, "onscreen.renavigate[1].type.param", "nope"},
		{"no fields", func(m map[string]any) { delete(m, "fields") }, "onscreen.fields", "mark at least one"},
		{"field without param", func(m map[string]any) { m["fields"] = []any{map[string]any{"selector": "#a"}} }, "onscreen.fields[0].param", "run parameter"},
		{"field for id", func(m map[string]any) { m["fields"] = []any{map[string]any{"param": "id", "selector": "#a"}} }, "onscreen.fields[0].param", "identity"},
		{"field with no source", func(m map[string]any) { m["fields"] = []any{map[string]any{"param": "name"}} }, "onscreen.fields[0]", "region"},
		{"field with both sources", func(m map[string]any) {
			m["fields"] = []any{map[string]any{"param": "name", "selector": "#a", "region": []int{0, 0, 10, 10}}}
		}, "onscreen.fields[0]", "not both"},
		{"bad region", func(m map[string]any) {
			m["fields"] = []any{map[string]any{"param": "name", "region": []int{0, 0, 10}}}
		}, "onscreen.fields[0].region", "[x, y, width, height]"},
		{"field param not in run", func(m map[string]any) { m["fields"] = []any{map[string]any{"param": "born", "selector": "#b"}} }, "onscreen.fields[0].param", "born"},
		{"ratio above 1", func(m map[string]any) { m["readback_min_ratio"] = 1.5 }, "onscreen.readback_min_ratio", "at most 1"},
		{"unknown key", func(m map[string]any) { m["typo"] = 1 }, "onscreen.typo", "unknown key"},
		{"row_selector with a region", func(m map[string]any) { m["row_selector"] = "tr.row" }, "onscreen.fields[0].region", "inside each row"},
		{"row_selector on an x display", func(m map[string]any) {
			delete(m, "renavigate")
			m["same_surface"] = true
			m["screen"] = map[string]any{"display": ":99"}
			m["row_selector"] = "tr.row"
		}, "onscreen.row_selector", "X display"},
		{"ready_selector on an x display", func(m map[string]any) {
			delete(m, "renavigate")
			m["same_surface"] = true
			m["screen"] = map[string]any{"display": ":99"}
			m["ready_selector"] = "#loaded"
		}, "onscreen.ready_selector", "X display"},
		{"ready_selector blank", func(m map[string]any) { m["ready_selector"] = "   " }, "onscreen.ready_selector", "a CSS selector"},
		{"read_post_paths on the same surface", func(m map[string]any) {
			delete(m, "renavigate")
			m["same_surface"] = true
			m["read_post_paths"] = []any{"/auth/token"}
		}, "onscreen.read_post_paths", "remove read_post_paths"},
		{"read_post_paths not a path", func(m map[string]any) { m["read_post_paths"] = []any{"auth/token"} }, "onscreen.read_post_paths[0]", "starts with /"},
		{"read_post_paths with a fragment", func(m map[string]any) { m["read_post_paths"] = []any{"/auth#x"} }, "onscreen.read_post_paths[0]", "no fragment"},
		{"absent selector on the same surface", func(m map[string]any) {
			delete(m, "renavigate")
			m["same_surface"] = true
			m["absent_selector"] = "#nf"
		}, "onscreen.absent_selector", "re-opens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := baseSection()
			tt.edit(inner(sec))
			_, err := configureSection(t, sec, nil)
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.path || !strings.Contains(ce.Message, tt.message) {
				t.Errorf("refusal %q: %q; want path %q and a message with %q", ce.Path, ce.Message, tt.path, tt.message)
			}
		})
	}
}

// TestReadPostPathsOrigin: read_post_paths are paths on the site the
// re-navigation opens first.
func TestReadPostPathsOrigin(t *testing.T) {
	sec := baseSection()
	inner(sec)["read_post_paths"] = []any{"/auth/token", "/graphql"}
	s, err := configureSection(t, sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.readPosts, " "); got != "https://app.example.org/auth/token https://app.example.org/graphql" {
		t.Errorf("read posts %q; want the two paths on the site of renavigate[0].open", got)
	}
}

// TestCDPURLFromSecret: the address can come from an environment variable
// the daemon resolves; a refusal never quotes it.
func TestCDPURLFromSecret(t *testing.T) {
	sec := baseSection()
	inner(sec)["screen"] = map[string]any{"cdp_url_env": "APP_CDP"}
	s, err := configureSection(t, sec, map[string]string{cdpSecretSlot: "http://127.0.0.1:9333"})
	if err != nil || s.cdpURL != "http://127.0.0.1:9333" {
		t.Fatalf("settings %+v, %v", s, err)
	}
	_, err = configureSection(t, sec, map[string]string{cdpSecretSlot: "gopher://secret-host-name"})
	if err == nil || strings.Contains(err.Error(), "secret-host-name") {
		t.Errorf("a bad address from a secret: %v; want a refusal that does not quote it", err)
	}
}

// TestValueOf: the ratio rule, normalised for case and white space.
func TestValueOf(t *testing.T) {
	f := field{param: "name", expected: "Grace Hopper", minRatio: 0.9}
	tests := map[string]string{
		"Grace Hopper":       "Grace Hopper",
		"grace   HOPPER":     "Grace Hopper", // case and spacing
		"Grace Hoppor":       "Grace Hopper", // one misread character in twelve
		"Zebulon Quartermai": "Zebulon Quartermai",
		"Grace  Hop":         "Grace Hop", // too far: shown as read, collapsed
	}
	for shown, want := range tests {
		if got := valueOf(f, shown); got != want {
			t.Errorf("valueOf(%q) = %q; want %q", shown, got, want)
		}
	}
	exact := field{param: "amount", expected: "1,204.50", minRatio: 1}
	if got := valueOf(exact, "1,204.80"); got != "1,204.80" {
		t.Errorf("min_ratio 1: a misread digit reads as %q; want what was shown", got)
	}
}

func FuzzConfigure(f *testing.F) {
	raw, _ := json.Marshal(baseSection())
	f.Add(raw)
	f.Add([]byte(`{"onscreen":{"screen":{"cdp_url":"http://h:1"},"same_surface":true,"fields":[{"param":"name","selector":"#n"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := configured(sdk.ConfigureRequest{Kind: Kind, Config: data})
		if err == nil {
			_, err = s.bind(baseParams)
		}
		var ce *refusal.Error
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("a refusal that is not a *refusal.Error: %v", err)
		}
	})
}

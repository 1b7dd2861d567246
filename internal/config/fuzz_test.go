package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// FuzzParseDeployment: any bytes either parse into candidates that keep the
// invariants below or are refused with a path; nothing panics.
func FuzzParseDeployment(f *testing.F) {
	for _, seed := range []string{
		"effects: {kind: sql, sqlite_database: x.db, sql_query: SELECT 1}\n",
		"effects:\n  candidates:\n    - {kind: document, root: /x}\n    - {kind: acme, options: {a: 1}, option_params: {b: {param: p}}, secret_env: {pw: ACME_PW}}\n",
		`{"effects": {"kind": "rest", "auth": {"bearer_env": "TOKEN"}, "evidence_keep_fields": ["id"]}}`,
		"effects: {kind: sql, freshness_field: ts, freshness_window_s: 60, settle_s: 2}\n",
		"effects: {kind: acme, options: {client_secret: x}}\n",
		"effects: &a {kind: *a}\n",
		"effects: [1, 2]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDeployment(data)
		if err != nil {
			if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path == "" || ce.Message == "" {
				t.Fatalf("refusal without a path and message: %#v", err)
			}
			return
		}
		if len(d.Candidates) == 0 {
			t.Fatal("a parsed deployment has no candidate")
		}
		for i, c := range d.Candidates {
			if c.Index != i || c.Kind == "" || c.Section["kind"] != c.Kind {
				t.Fatalf("candidate %d: index %d kind %q section kind %v", i, c.Index, c.Kind, c.Section["kind"])
			}
			if BuiltinKinds[c.Kind] {
				for _, k := range []string{"options", "option_params", "secret_env"} {
					if _, ok := c.Section[k]; ok {
						t.Fatalf("built-in kind %s kept plugin-only field %s", c.Kind, k)
					}
				}
			}
			if len(c.Redaction.RedactFields) > 0 && len(c.Redaction.KeepFields) > 0 {
				t.Fatal("both redaction lists accepted")
			}
			for slot, name := range c.Secrets {
				if !envNameRE.MatchString(name) {
					t.Fatalf("secret %s names %q, not a variable", slot, name)
				}
			}
			if opts, ok := c.Section["options"].(map[string]any); ok {
				for k := range opts {
					if namesCredential(k) {
						t.Fatalf("credential option %q accepted", k)
					}
				}
			}
			// Resolving with every variable set never leaks a value into
			// the adapter's config.
			cfg, secrets, err := c.Resolve(map[string]string{}, func(string) (string, bool) { return "SECRET-VALUE-123", true }, func(string) bool { return true })
			if err != nil {
				continue // e.g. an option_params entry naming a missing parameter
			}
			if len(c.Secrets) > 0 && strings.Contains(string(cfg), "SECRET-VALUE-123") {
				t.Fatalf("a secret value reached the config JSON: %s", cfg)
			}
			if len(secrets) != len(c.Secrets) || !json.Valid(cfg) {
				t.Fatalf("resolve: %d secrets for %d refs, valid JSON %v", len(secrets), len(c.Secrets), json.Valid(cfg))
			}
		}
	})
}

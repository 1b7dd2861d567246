package httpx

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestExcerptRedactsEveryForm(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Auth *Auth `json:"auth"`
	}
	if err := (sdk.ConfigureRequest{Config: json.RawMessage(`{"auth":{"basic_env":"B"}}`)}).DecodeConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Auth.Credentials(map[string]string{"auth.basic_env": "reader:pa55word-XYZ"})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", ExcerptRunes-5) + " reader:pa55word-XYZ\n\tcmVhZGVyOnBhNTV3b3JkLVhZWg== pa55word-XYZ"
	got := Excerpt([]byte(body), creds)
	for _, leak := range []string{"pa55", "cmVhZGVyOnBhNTV3b3JkLVhZWg"} {
		if strings.Contains(got, leak) {
			t.Errorf("excerpt leaks %q: %q", leak, got)
		}
	}
	if !strings.Contains(got, "[red") || !strings.HasSuffix(got, "…") {
		t.Errorf("excerpt %q: want a redaction and a cut", got)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	doc, err := DecodeJSON([]byte(`{"a":{"b":[{"c":1.50},null]},"n":null,"0":"key"}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path  string
		want  any
		found Found
	}{
		{"a.b.0.c", json.Number("1.50"), Present},
		{"a.b.1", nil, Null},
		{"a.b.1.c", nil, Null},
		{"n.x", nil, Null},
		{"a.b.2", nil, Missing},
		{"a.b.00", nil, Missing},
		{"a.b.c", nil, Missing},
		{"a.x", nil, Missing},
		{"0", "key", Present},
	}
	for _, tt := range tests {
		p, err := ParsePath(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		got, found := p.Lookup(doc)
		if got != tt.want || found != tt.found {
			t.Errorf("%s = %v, %v; want %v, %v", tt.path, got, found, tt.want, tt.found)
		}
	}
	if _, err := DecodeJSON([]byte(`{"a":1} {"b":2}`)); err == nil {
		t.Error("two JSON values decoded as one")
	}
}

func TestFollowStaysOnOrigin(t *testing.T) {
	t.Parallel()
	base, _ := url.Parse("https://erp.example.com/api")
	cur, _ := url.Parse("https://erp.example.com:443/api/list?page=1")
	for ref, ok := range map[string]bool{
		"/api/list?page=2":                       true,
		"?page=2":                                true,
		"https://ERP.example.com/api/list":       true,
		"http://erp.example.com/api/list":        false,
		"https://erp.example.com:8443/api/list":  false,
		"//evil.example.com/api/list":            false,
		"https://erp.example.com.evil.com/steal": false,
	} {
		_, err := Follow(base, cur, ref)
		if (err == nil) != ok {
			t.Errorf("Follow(%q) = %v; want allowed=%v", ref, err, ok)
		}
	}
}

func TestConnect(t *testing.T) {
	t.Parallel()
	base, err := url.Parse("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var e Endpoint
	creds, client, warnings, err := e.Connect(base, &Auth{BearerEnv: new("TOKEN")}, map[string]string{"auth.bearer_env": "t0k"})
	if err != nil || client == nil || creds.Scheme() != "a bearer token" {
		t.Fatalf("Connect = %v, %v, %v; want a client sending a bearer token", creds.Scheme(), client, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "unencrypted") {
		t.Errorf("warnings %q; want the one about credentials over http://", warnings)
	}
	creds, _, warnings, err = e.Connect(base, nil, nil)
	if err != nil || !creds.None() || len(warnings) != 0 {
		t.Errorf("Connect without auth = %v, %q, %v; want no credentials and no warnings", creds.Scheme(), warnings, err)
	}
	_, _, _, err = e.Connect(base, &Auth{BearerEnv: new("TOKEN")}, nil)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "auth.bearer_env" {
		t.Errorf("Connect with no secret delivered = %v; want a *refusal.Error at auth.bearer_env", err)
	}
	_, _, _, err = Endpoint{CAFile: "/nonexistent/ca.pem"}.Connect(base, nil, nil)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "ca_file" {
		t.Errorf("Connect with an unreadable ca_file = %v; want a *refusal.Error at ca_file", err)
	}
}

package httpx

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/verifierd/verifierd/sdk"
)

// AuthKeys are the keys of an `auth:` map: one of bearer_env, basic_env, or
// header with value_env.
var AuthKeys = []string{"bearer_env", "header", "value_env", "basic_env"}

// Credentials is one request header carrying a secret, and every form of
// that secret that must never appear in a log, a reason or an excerpt.
type Credentials struct {
	header string
	value  string
	forms  []string
}

// None reports whether no credentials are configured.
func (c Credentials) None() bool { return c.header == "" }

// Set adds the credential header to h.
func (c Credentials) Set(h http.Header) {
	if c.header != "" {
		h.Set(c.header, c.value)
	}
}

// Redact replaces every form of the secret in s with [redacted].
func (c Credentials) Redact(s string) string {
	for _, f := range c.forms {
		s = strings.ReplaceAll(s, f, "[redacted]")
	}
	return s
}

// Scheme names the kind of credentials for messages, never their value.
func (c Credentials) Scheme() string {
	switch {
	case c.header == "":
		return "no credentials"
	case strings.HasPrefix(c.value, "Bearer "):
		return "a bearer token"
	case strings.HasPrefix(c.value, "Basic "):
		return "basic auth"
	}
	return "the " + c.header + " header"
}

// ParseAuth reads an `auth:` map (nil means none). The section holds
// environment-variable names; the daemon resolved them and delivered the
// values in secrets, keyed by the key's dotted path (auth.bearer_env).
func ParseAuth(s *Section, secrets map[string]string) (Credentials, error) {
	if s == nil {
		return Credentials{}, nil
	}
	var set []string
	for _, k := range []string{"bearer_env", "basic_env", "header"} {
		if s.Has(k) {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		return Credentials{}, &sdk.ConfigError{Path: s.path, Message: "set exactly one of bearer_env, basic_env, or header with value_env"}
	}
	if set[0] != "header" && s.Has("value_env") {
		return Credentials{}, &sdk.ConfigError{Path: s.At("value_env"), Message: "value_env goes with header; remove it or use header: NAME with value_env"}
	}
	switch set[0] {
	case "bearer_env":
		tok, err := Secret(s, "bearer_env", secrets)
		if err != nil {
			return Credentials{}, err
		}
		return Bearer(tok), nil
	case "basic_env":
		pair, err := Secret(s, "basic_env", secrets)
		if err != nil {
			return Credentials{}, err
		}
		user, pass, ok := strings.Cut(pair, ":")
		if !ok || user == "" {
			return Credentials{}, &sdk.ConfigError{Path: s.At("basic_env"), Message: "the variable must hold user:password"}
		}
		enc := base64.StdEncoding.EncodeToString([]byte(pair))
		return Credentials{header: "Authorization", value: "Basic " + enc, forms: nonEmpty(enc, pair, pass)}, nil
	}
	name, err := s.String("header")
	if err != nil {
		return Credentials{}, err
	}
	if !validHeaderName(name) {
		return Credentials{}, &sdk.ConfigError{Path: s.At("header"), Message: fmt.Sprintf("%q is not a usable header name; write e.g. Authorization or X-Api-Key", name)}
	}
	if !s.Has("value_env") {
		return Credentials{}, &sdk.ConfigError{Path: s.At("value_env"), Message: "missing: name the environment variable that holds the header's value"}
	}
	v, err := Secret(s, "value_env", secrets)
	if err != nil {
		return Credentials{}, err
	}
	if strings.ContainsAny(v, "\r\n") {
		return Credentials{}, &sdk.ConfigError{Path: s.At("value_env"), Message: "the variable's value holds a line break, which no header can carry"}
	}
	// "token key:secret", "Bearer abc": the part after the scheme is the
	// secret too, and servers echo it alone.
	_, rest, _ := strings.Cut(v, " ")
	return Credentials{header: http.CanonicalHeaderKey(name), value: v, forms: nonEmpty(v, rest)}, nil
}

// Bearer is an Authorization: Bearer credential.
func Bearer(token string) Credentials {
	return Credentials{header: "Authorization", value: "Bearer " + token, forms: nonEmpty(token)}
}

// Secret returns the resolved value of the *_env key in s.
func Secret(s *Section, key string, secrets map[string]string) (string, error) {
	name, err := s.String(key)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", &sdk.ConfigError{Path: s.At(key), Message: "must name an environment variable, e.g. SOR_TOKEN"}
	}
	v, ok := secrets[s.At(key)]
	if !ok || v == "" {
		return "", &sdk.ConfigError{Path: s.At(key), Message: fmt.Sprintf("no value was delivered for the environment variable %s; set it in the daemon's environment and allow it under secrets.allow", name)}
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", &sdk.ConfigError{Path: s.At(key), Message: fmt.Sprintf("the value of %s holds a line break, which no header can carry", name)}
	}
	return v, nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	// Longest first, so that a secret containing another is redacted whole.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func validHeaderName(s string) bool {
	if s == "" || strings.EqualFold(s, "Host") || strings.EqualFold(s, "Content-Length") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return false
		}
	}
	return true
}

package httpx

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/verifierd/verifierd/internal/secretforms"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Credentials is one request header carrying a secret, and every form of
// that secret that must never appear in a log, a reason or an excerpt.
type Credentials struct {
	header string
	value  string
	forms  *secretforms.Matcher // every form of the secret (secretforms.Of)
}

// None reports whether no credentials are configured.
func (c Credentials) None() bool { return c.header == "" }

// Set adds the credential header to h.
func (c Credentials) Set(h http.Header) {
	if c.header != "" {
		h.Set(c.header, c.value)
	}
}

// Redact replaces every form of the secret in s (secretforms.Of: in any
// case, base64, URL-escaped…) with [redacted], in one pass.
func (c Credentials) Redact(s string) string { return c.forms.Mask(s) }

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

// Credentials reads the `auth:` map (nil means none) with the values the
// daemon delivered in secrets.
func (a *Auth) Credentials(secrets map[string]string) (Credentials, error) {
	if a == nil {
		return Credentials{}, nil
	}
	var set []string
	for k, v := range map[string]*string{"bearer_env": a.BearerEnv, "basic_env": a.BasicEnv, "header": a.Header} {
		if v != nil {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		return Credentials{}, &refusal.Error{Path: "auth", Message: "set exactly one of bearer_env, basic_env, or header with value_env"}
	}
	if set[0] != "header" && a.ValueEnv != nil {
		return Credentials{}, &refusal.Error{Path: "auth.value_env", Message: "value_env goes with header; remove it or use header: NAME with value_env"}
	}
	switch set[0] {
	case "bearer_env":
		tok, err := Secret("auth.bearer_env", *a.BearerEnv, secrets)
		if err != nil {
			return Credentials{}, err
		}
		return Bearer(tok), nil
	case "basic_env":
		pair, err := Secret("auth.basic_env", *a.BasicEnv, secrets)
		if err != nil {
			return Credentials{}, err
		}
		user, _, ok := strings.Cut(pair, ":")
		if !ok || user == "" {
			return Credentials{}, &refusal.Error{Path: "auth.basic_env", Message: "the variable must hold user:password"}
		}
		enc := base64.StdEncoding.EncodeToString([]byte(pair))
		return Credentials{header: "Authorization", value: "Basic " + enc, forms: formsOf("auth.basic_env", pair)}, nil
	}
	name := *a.Header
	if !validHeaderName(name) {
		return Credentials{}, &refusal.Error{Path: "auth.header", Message: fmt.Sprintf("%q is not a usable header name; write e.g. Authorization or X-Api-Key", name)}
	}
	if a.ValueEnv == nil {
		return Credentials{}, &refusal.Error{Path: "auth.value_env", Message: "missing: name the environment variable that holds the header's value"}
	}
	v, err := Secret("auth.value_env", *a.ValueEnv, secrets)
	if err != nil {
		return Credentials{}, err
	}
	if strings.ContainsAny(v, "\r\n") {
		return Credentials{}, &refusal.Error{Path: "auth.value_env", Message: "the variable's value holds a line break, which no header can carry"}
	}
	// "token key:secret", "Bearer abc…": the part after the scheme is the
	// secret too, and servers echo it alone (secretforms.Of).
	return Credentials{header: http.CanonicalHeaderKey(name), value: v, forms: formsOf("auth.value_env", v)}, nil
}

// Bearer is an Authorization: Bearer credential.
func Bearer(token string) Credentials {
	return Credentials{header: "Authorization", value: "Bearer " + token, forms: formsOf("auth.bearer_env", token)}
}

// Secret returns the value the daemon delivered for the *_env key at path,
// which names the environment variable name.
func Secret(path, name string, secrets map[string]string) (string, error) {
	if name == "" {
		return "", &refusal.Error{Path: path, Message: "must name an environment variable, e.g. SOR_TOKEN"}
	}
	v, ok := secrets[path]
	if !ok || v == "" {
		return "", &refusal.Error{Path: path, Message: fmt.Sprintf("no value was delivered for the environment variable %s; set it in the daemon's environment and allow it under secrets.allow", name)}
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", &refusal.Error{Path: path, Message: fmt.Sprintf("the value of %s holds a line break, which no header can carry", name)}
	}
	return v, nil
}

// formsOf is the matcher of every form of the value v of slot.
func formsOf(slot, v string) *secretforms.Matcher {
	return secretforms.NewMatcher(secretforms.Of(slot, v))
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

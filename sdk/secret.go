package sdk

import (
	"strings"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// secretEnvPrefix prefixes, in ConfigureRequest.Secrets, a slot declared
// under secret_env: (sdk/unstable/deployment.SecretEnvPrefix).
const secretEnvPrefix = "secret_env."

// Secret returns the value of the secret declared in the section under
// slot, and whether the section declares it (an empty value is not one).
// A slot is declared in one of two ways, and named after its declaration
// (sdk/unstable/deployment states the rule the daemon follows):
//
//   - secret_env: {password: ACME_PASSWORD} declares the slot "password":
//     req.Secret("password"). This is how a plugin declares a secret.
//   - a key ending in _env anywhere in the section, such as
//     auth: {bearer_env: ACME_TOKEN}, declares the slot named by its
//     dotted path: req.Secret("auth.bearer_env").
//
// The value is the daemon's environment variable the section names, read
// when the daemon configures the adapter; it holds at least
// deployment.MinSecretBytes (8) bytes, as the daemon refuses a shorter
// one. Never log it, return it, or put it in a reason or a record: the
// daemon masks it in every form it knows of (base64, URL-escaped, another
// case) in what an adapter returns, but an adapter's own log is its own.
func (r ConfigureRequest) Secret(slot string) (string, bool) {
	v, ok := r.Secrets[secretKey(slot)]
	return v, ok && v != ""
}

// RequireSecret is Secret for a secret the adapter cannot work without: a
// slot the section does not declare is a *refusal.Error at the declaration's
// path, saying what to write.
func (r ConfigureRequest) RequireSecret(slot string) (string, error) {
	if v, ok := r.Secret(slot); ok {
		return v, nil
	}
	if isEnvKey(slot) {
		return "", &refusal.Error{Path: slot, Message: "missing: write the name of the daemon's environment variable that holds this secret"}
	}
	return "", &refusal.Error{Path: secretEnvPrefix + slot, Message: "missing: declare it as secret_env: {" + slot + ": VARIABLE}, naming the daemon's environment variable that holds it"}
}

// secretKey is the key of slot in ConfigureRequest.Secrets.
func secretKey(slot string) string {
	if isEnvKey(slot) {
		return slot
	}
	return secretEnvPrefix + slot
}

// isEnvKey reports whether slot is the dotted path of a key ending in _env.
func isEnvKey(slot string) bool {
	last := slot
	if i := strings.LastIndexByte(slot, '.'); i >= 0 {
		last = slot[i+1:]
	}
	return strings.HasSuffix(last, "_env")
}

// Package deployment is the daemon's own reading of one adapter section of
// a deployment's effects: what of it reaches the adapter, under which
// secret slots, and with which options bound. The daemon (its config
// package) calls Parse and Resolve for every candidate it configures; the
// qualification kit (sdk/adaptertest) calls the same two functions, so an
// adapter is qualified against the exact ConfigureRequest the daemon will
// send it.
//
// # What the adapter receives
//
// ConfigureRequest.Config is the section as a JSON object with:
//
//   - kind: the kind the section names;
//   - options: the section's options, with every option_params entry bound
//     to the run's parameters and merged in as a string (absent when the
//     section has neither);
//   - every other key the operator wrote, as written: a plugin's own
//     top-level keys are not checked by the daemon, the adapter's strict
//     decoder checks them; a secret reference stays an environment-variable
//     name.
//
// The daemon's own keys never reach the adapter: kind aside, those are
// evidence_redact_fields, evidence_keep_fields, freshness_field,
// freshness_window_s, settle_s, option_params, secret_env, compensator,
// census and newness (DaemonKey).
//
// # Secret slots
//
// ConfigureRequest.Secrets holds each secret's value under its slot, and an
// adapter reads it with ConfigureRequest.Secret(slot). A slot is declared
// in exactly one of two ways, and is named after its declaration:
//
//   - secret_env: {password: ACME_PASSWORD} declares the slot "password"
//     (sent as "secret_env.password"; Secret("password") reads it). This
//     is how a plugin declares a secret; the built-in kinds refuse it.
//   - a key ending in _env anywhere in the section, such as
//     auth: {bearer_env: ACME_TOKEN}, declares the slot named by its dotted
//     path, "auth.bearer_env" (Secret("auth.bearer_env") reads it). This
//     is how the built-in kinds declare theirs.
//
// A secret_env slot name is a letter or '_' followed by letters, digits,
// '_' or '-', and may not end in _env, so the two forms never name the same
// slot. Every value is the name of an environment variable of the daemon,
// never a secret itself; Resolve looks each one up and refuses a variable
// the daemon does not allow or that is not set.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package deployment

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// SecretEnvPrefix prefixes, in ConfigureRequest.Secrets, a slot declared
// under secret_env:.
const SecretEnvPrefix = "secret_env."

var daemonKeys = map[string]bool{
	"evidence_redact_fields": true, "evidence_keep_fields": true,
	"freshness_field": true, "freshness_window_s": true, "settle_s": true,
	"options": true, "option_params": true, "secret_env": true, "compensator": true,
	"census": true, "newness": true, "changes": true,
}

// DaemonKey reports whether key is one the daemon reads itself at the top
// of a section, and so never sends to the adapter as written (options is
// sent, rebuilt with its option_params bound; kind is sent).
func DaemonKey(key string) bool { return key == "kind" || daemonKeys[key] }

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	slotRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// Section is one adapter section, read: the part the adapter receives and
// the references the daemon resolves for it.
type Section struct {
	// Kind is the section's kind.
	Kind string
	// Fields are the keys the adapter receives, unbound: kind, options as
	// written, and every key that is not the daemon's. Secret references
	// stay environment-variable names.
	Fields map[string]any
	// Secrets maps each slot, as sent in ConfigureRequest.Secrets
	// ("secret_env.password", "auth.bearer_env"), to the environment
	// variable it names.
	Secrets map[string]string
	// OptionParams are the option_params entries, bound at Resolve.
	OptionParams map[string]param.Value
}

// Parse reads the adapter section sec, found at path ("effects",
// "effects.candidates[1]"), for a plugin kind when plugin is true or a
// built-in kind (which refuses options, option_params and secret_env)
// when false. The daemon's other keys are left for the caller to read.
func Parse(sec map[string]any, path string, plugin bool) (*Section, error) {
	kind, ok := sec["kind"].(string)
	if !ok || kind == "" {
		return nil, refuse(path+".kind", "must name the adapter kind, e.g. kind: sql")
	}
	s := &Section{Kind: kind, Fields: map[string]any{}, Secrets: map[string]string{}}
	for _, k := range []string{"options", "option_params", "secret_env"} {
		if _, ok := sec[k]; ok && !plugin {
			return nil, refuse(path+"."+k, "%s is for plugin kinds only; the built-in kind %q refuses it (use its own documented fields)", k, kind)
		}
	}
	if err := s.parseOptions(sec, path); err != nil {
		return nil, err
	}
	if v, ok := sec["secret_env"]; ok {
		se, isMap := v.(map[string]any)
		if !isMap {
			return nil, refuse(path+".secret_env", "must map a secret slot to an environment-variable name")
		}
		for _, slot := range slices.Sorted(maps.Keys(se)) {
			if !slotRE.MatchString(slot) || strings.HasSuffix(slot, "_env") {
				return nil, refuse(path+".secret_env."+slot, "a slot name is a letter or '_' followed by letters, digits, '_' or '-', and does not end in _env (the adapter reads it as req.Secret(%q)); rename it, e.g. password", slot)
			}
			name, isStr := se[slot].(string)
			if !isStr || !envNameRE.MatchString(name) {
				return nil, refuse(path+".secret_env."+slot, "must be an environment-variable name such as ACME_READER_PASSWORD, not a secret value")
			}
			s.Secrets[SecretEnvPrefix+slot] = name
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sec)) {
		if DaemonKey(k) {
			continue
		}
		// A credential-named key carries a secret in the file wherever
		// it is: the section's own keys are walked as options: are.
		if at := credentialAt(map[string]any{k: sec[k]}, path); at != "" {
			return nil, refuse(at, "a section may not carry a credential, at any depth; put its environment-variable name in a *_env key (built-in kinds) or under secret_env: (plugins) instead")
		}
		s.Fields[k] = sec[k]
		if err := EnvRefs(sec[k], k, path, s.Secrets); err != nil {
			return nil, err
		}
	}
	s.Fields["kind"] = kind
	return s, nil
}

func (s *Section) parseOptions(sec map[string]any, path string) error {
	if v, ok := sec["options"]; ok {
		opts, isMap := v.(map[string]any)
		if !isMap {
			return refuse(path+".options", "must be a map of non-secret settings")
		}
		if at := credentialAt(opts, path+".options"); at != "" {
			return refuse(at, "an option may not carry a credential, at any depth of options:; put its environment-variable name under secret_env: instead")
		}
		s.Fields["options"] = opts
	}
	v, ok := sec["option_params"]
	if !ok {
		return nil
	}
	op, isMap := v.(map[string]any)
	if !isMap {
		return refuse(path+".option_params", `must be a map of option name to {param: name}, {template: "text {name}"} or a literal`)
	}
	s.OptionParams = map[string]param.Value{}
	opts, _ := s.Fields["options"].(map[string]any)
	if at := credentialAt(op, path+".option_params"); at != "" {
		return refuse(at, "an option may not carry a credential, at any depth of option_params:; use secret_env:")
	}
	for _, k := range slices.Sorted(maps.Keys(op)) {
		if _, dup := opts[k]; dup {
			return refuse(path+".option_params."+k, "also set under options:; set it in one place")
		}
		val, err := param.Parse(op[k], path+".option_params."+k, param.Templates())
		if err != nil {
			return err
		}
		s.OptionParams[k] = val
	}
	return nil
}

// EnvRefs records into out every string value under a key ending in _env,
// at any depth of v (auth.bearer_env, sign_in.password_env), under its
// slot: slot is v's own dotted path inside the section, path the section's
// path for a refusal. A value that is not an environment-variable name is
// refused.
func EnvRefs(v any, slot, path string, out map[string]string) error {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := EnvRefs(x[k], slot+"."+k, path, out); err != nil {
				return err
			}
		}
	case string:
		if strings.HasSuffix(lastSegment(slot), "_env") {
			if !envNameRE.MatchString(x) {
				return refuse(path+"."+slot, "must be an environment-variable name, not a secret value")
			}
			out[slot] = x
		}
	}
	return nil
}

func lastSegment(slot string) string {
	if i := strings.LastIndexByte(slot, '.'); i >= 0 {
		return slot[i+1:]
	}
	return slot
}

// NamesCredential reports whether an option key names a credential: its
// last word is password, secret, token or credential, or it ends in
// api_key. Words are split at '_', '-', '.' and a lower-to-upper case
// change, so clientSecret, x-api-key and api.key are credentials as
// client_secret and api_key are. Such a key is refused at any depth of
// options and option_params: a credential goes under secret_env.
func NamesCredential(key string) bool {
	var b strings.Builder
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case r == '-' || r == '.':
			r = '_'
		case i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
			unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])):
			// fooBar, foo2Bar and DBPassword (an acronym, then a word).
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	k := b.String()
	if strings.HasSuffix(k, "api_key") || strings.HasSuffix(k, "apikey") {
		return true
	}
	words := strings.FieldsFunc(k, func(r rune) bool { return r == '_' })
	if len(words) == 0 {
		return false
	}
	switch strings.TrimSuffix(words[len(words)-1], "s") {
	case "password", "secret", "token", "credential", "passwd":
		return true
	}
	return false
}

// credentialAt is the path of the first key under v, at any depth of its
// maps and lists (in sorted key order), that names a credential
// (NamesCredential), or "" when none does. path is v's own path: a key k
// of a map at p is p.k, an element i of a list is p[i].
func credentialAt(v any, path string) string {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if NamesCredential(k) {
				return path + "." + k
			}
			if at := credentialAt(x[k], path+"."+k); at != "" {
				return at
			}
		}
	case []any:
		for i, e := range x {
			if at := credentialAt(e, fmt.Sprintf("%s[%d]", path, i)); at != "" {
				return at
			}
		}
	}
	return ""
}

// Resolve returns what the adapter receives for one run: the section as
// JSON (ConfigureRequest.Config) with option_params bound to params and
// merged into options, and the secrets (ConfigureRequest.Secrets), each
// looked up with lookupEnv once allow (nil: any) permits its variable.
// path names the section in a refusal ("candidates[0]"). A missing run
// parameter, or a missing or refused variable, is refused naming the
// parameter or the variable, never a value.
func (s *Section) Resolve(params map[string]string, path string, lookupEnv func(string) (string, bool), allow func(string) bool) (json.RawMessage, map[string]string, error) {
	fields := maps.Clone(s.Fields)
	if len(s.OptionParams) > 0 {
		opts := map[string]any{}
		if o, ok := fields["options"].(map[string]any); ok {
			maps.Copy(opts, o)
		}
		var missing []string
		for _, k := range slices.Sorted(maps.Keys(s.OptionParams)) {
			v := s.OptionParams[k]
			var absent []string
			for _, name := range v.Params() {
				if _, ok := params[name]; !ok {
					absent = append(absent, strconv.Quote(name))
				}
			}
			if len(absent) > 0 {
				missing = append(missing, absent...)
				continue
			}
			// An option goes to a plugin as data; what the plugin does
			// with it is its own, so only NUL and control characters are
			// refused here (a template's literal text is kept as written).
			bound, err := v.BindIn(params, "", param.Data)
			if err != nil {
				return nil, nil, refuse(path+".option_params."+k, "%s", err.Error())
			}
			opts[k] = bound
		}
		if len(missing) > 0 {
			return nil, nil, refuse(path+".option_params", "missing run parameter %s", strings.Join(missing, ", "))
		}
		fields["options"] = opts
	}
	secrets, err := LookupSecrets(s.Secrets, path, lookupEnv, allow)
	if err != nil {
		return nil, nil, err
	}
	config, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, refuse(path, "cannot encode the section: %v", err)
	}
	return config, secrets, nil
}

// Codes of a secret reference LookupSecrets refuses: the variable is
// outside the daemon's secrets.allow (the operator's policy), or it is
// not set where the daemon runs (the platform's).
const (
	CodeSecretNotAllowed = "secret_not_allowed"
	CodeSecretUnset      = "secret_unset"
	// CodeSecretTooShort is a value shorter than MinSecretBytes (for a
	// basic_env slot, a password that is): too short to mask wherever a
	// system of record echoes it without masking ordinary text too.
	CodeSecretTooShort = "secret_too_short"
)

// MinSecretBytes is the shortest secret value LookupSecrets accepts.
const MinSecretBytes = 8

// LookupSecrets resolves refs (slot -> environment-variable name) with
// lookupEnv, once allow (nil: any) permits each variable; an unset or
// empty variable is refused at path.slot, naming the variable.
func LookupSecrets(refs map[string]string, path string, lookupEnv func(string) (string, bool), allow func(string) bool) (map[string]string, error) {
	out := make(map[string]string, len(refs))
	for _, slot := range slices.Sorted(maps.Keys(refs)) {
		name := refs[slot]
		if allow != nil && !allow(name) {
			e := refuse(path+"."+slot, "the daemon does not allow the environment variable %s; add it to secrets.allow in the daemon config", name)
			e.Code = CodeSecretNotAllowed
			return nil, e
		}
		v, ok := lookupEnv(name)
		if !ok || v == "" {
			e := refuse(path+"."+slot, "environment variable %s is not set in the daemon's environment", name)
			e.Code = CodeSecretUnset
			return nil, e
		}
		if e := checkSecretLength(path+"."+slot, name, v); e != nil {
			return nil, e
		}
		out[slot] = v
	}
	return out, nil
}

// checkSecretLength refuses a value v of the variable name, at path,
// shorter than MinSecretBytes, and for a basic_env slot (user:password) a
// password that is. The refusal names the variable, never the value.
func checkSecretLength(path, name, v string) *refusal.Error {
	if len(v) < MinSecretBytes {
		e := refuse(path, "environment variable %s holds fewer than %d bytes; a secret must be at least %d bytes (use a longer credential)", name, MinSecretBytes, MinSecretBytes)
		e.Code = CodeSecretTooShort
		return e
	}
	if strings.HasSuffix(path, "basic_env") {
		if _, pass, ok := strings.Cut(v, ":"); ok && len(pass) < MinSecretBytes {
			e := refuse(path, "the password in environment variable %s (user:password) holds fewer than %d bytes; use a password of at least %d bytes", name, MinSecretBytes, MinSecretBytes)
			e.Code = CodeSecretTooShort
			return e
		}
	}
	return nil
}

func refuse(path, format string, args ...any) *refusal.Error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

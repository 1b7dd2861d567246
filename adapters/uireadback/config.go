package uireadback

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// The secret slots the daemon fills from the deployment's *_env keys.
const (
	usernameSlot = "ui_readback.sign_in.username_env"
	passwordSlot = "ui_readback.sign_in.password_env"
)

// DefaultTruncationMarkers mark a value the page shortened.
var DefaultTruncationMarkers = []string{"…", "..."}

// DefaultSignInAttempts is sign_in.max_attempts when not set: a credential
// the application rejects is not tried again within the read.
const DefaultSignInAttempts = 1

// maxSignInAttempts is the largest sign_in.max_attempts accepted; most
// applications lock an account after three to five failed sign-ins.
const maxSignInAttempts = 5

// DefaultNavigationTimeout bounds each wait of a read-back (a page load, the
// sign-in, the record page becoming ready) when navigation_timeout_s is not
// set. The effect's own deadline bounds the whole read as well.
const DefaultNavigationTimeout = 15 * time.Second

// maxNavigationTimeoutS is the largest navigation_timeout_s accepted.
const maxNavigationTimeoutS = 600

// config is the deployment section as written: its kind and the
// ui_readback: map. The SDK's strict decoder fills it, refusing any key it
// does not declare with its path and the keys allowed there.
type config struct {
	UIReadback *sectionConfig `json:"ui_readback"`
}

type sectionConfig struct {
	RecordURL          *string                    `json:"record_url"`
	URLParams          map[string]json.RawMessage `json:"url_params"`
	SignIn             *signInConfig              `json:"sign_in"`
	ReadySelector      *string                    `json:"ready_selector"`
	EmptySelector      string                     `json:"empty_selector"`
	NotFoundSelector   string                     `json:"not_found_selector"`
	RowSelector        *string                    `json:"row_selector"`
	Fields             map[string]fieldConfig     `json:"fields"`
	Identity           *identityConfig            `json:"identity"`
	ReadPostPaths      []string                   `json:"read_post_paths"`
	TruncationMarkers  []string                   `json:"truncation_markers"`
	NavigationTimeoutS *float64                   `json:"navigation_timeout_s"`
}

type signInConfig struct {
	URL              *string `json:"url"`
	UsernameSelector *string `json:"username_selector"`
	PasswordSelector *string `json:"password_selector"`
	SubmitSelector   *string `json:"submit_selector"`
	SignedInSelector *string `json:"signed_in_selector"`
	UsernameEnv      *string `json:"username_env"`
	PasswordEnv      *string `json:"password_env"`
	MaxAttempts      *int    `json:"max_attempts"`
}

type fieldConfig struct {
	Selector          string   `json:"selector"`
	Attribute         string   `json:"attribute"`
	DateFormat        string   `json:"date_format"`
	Casefold          bool     `json:"casefold"`
	TruncationMarkers []string `json:"truncation_markers"`
}

type identityConfig struct {
	Reader *readerConfig   `json:"reader"`
	Value  json.RawMessage `json:"value"`
	Field  string          `json:"field"`
}

type readerConfig struct {
	Selector  *string `json:"selector"`
	Attribute string  `json:"attribute"`
}

// settings is a configuration resolved at Configure, every secret in hand.
// It never changes afterwards; bind copies it with one call's run
// parameters bound.
type settings struct {
	recordTmpl string       // record_url, placeholders unfilled
	urlParams  param.Values // url_params, bound per call
	idValue    param.Value  // identity.value, bound per call
	recordURL  string       // the record page, parameters bound and escaped (bound copies only)
	signIn     signIn
	gate       *signInGate     // shared by the bound copies of one configured instance
	spell      spellings       // the run's spellings of expected values (bound copies only)
	read       map[string]bool // the fields a contract of the call reads; nil: every field (readFields)
	// idIsIdentity: the contracts identify records by identity.field,
	// which every row of the page shares (bound copies only).
	idIsIdentity bool
	// foldedIdentity names the casefolded field the contracts identify
	// records by, "" when none (bound copies only).
	foldedIdentity   string
	readySelector    string
	emptySelector    string
	notFoundSelector string
	rowSelector      string
	fields           []field // sorted by name
	identity         identity
	readPostPaths    []string // origin+path of the record site
	truncation       []string
	navTimeout       time.Duration

	browser *Browser // the Chromium its read-backs run in
	hooks   hooks
}

type signIn struct {
	url              string
	usernameSelector string
	passwordSelector string
	submitSelector   string
	signedInSelector string
	username         string // secret
	password         string // secret
	maxAttempts      int    // rejected sign-ins before the gate holds
}

type field struct {
	name      string
	selector  string // "" reads the row element itself
	attribute string // "" reads the element's text
	layout    string // Go layout from date_format; "" for none
	isoLayout string // the ISO 8601 layout the parsed date is written in
	casefold  bool
	markers   []string // truncation markers of this field
}

type identity struct {
	selector  string
	attribute string
	value     string // bound, whitespace collapsed (bound copies only)
	raw       string // bound, as the run spelled it (bound copies only)
	field     string // record field that carries it; "" adds none
}

// configError is a refusal at a path inside the section.
func configError(path, format string, args ...any) error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// resolve checks the decoded deployment section and takes its secrets, one
// part of the section at a time; the run parameters are bound per call
// (bind).
func resolve(cfg config, req sdk.ConfigureRequest) (*settings, error) {
	sec := cfg.UIReadback
	if sec == nil {
		return nil, configError(section, "missing: the ui_readback: section holds record_url, sign_in, ready_selector, row_selector, fields and identity")
	}
	s := &settings{emptySelector: sec.EmptySelector, notFoundSelector: sec.NotFoundSelector}
	var origin string
	var err error
	if s.recordTmpl, s.urlParams, origin, err = parseRecordURL(sec); err != nil {
		return nil, err
	}
	if s.signIn, err = parseSignIn(sec.SignIn, req.Secrets); err != nil {
		return nil, err
	}
	if s.readySelector, err = required(section+".ready_selector", sec.ReadySelector); err != nil {
		return nil, err
	}
	if s.rowSelector, err = required(section+".row_selector", sec.RowSelector); err != nil {
		return nil, err
	}
	// identity before fields, so a field cannot shadow identity.field
	if s.identity, s.idValue, err = parseIdentity(sec.Identity); err != nil {
		return nil, err
	}
	if s.truncation, err = parseTruncationMarkers(sec.TruncationMarkers, section+".truncation_markers", DefaultTruncationMarkers); err != nil {
		return nil, err
	}
	if s.fields, err = parseFields(sec.Fields, s.identity.field, s.truncation); err != nil {
		return nil, err
	}
	if s.readPostPaths, err = parseReadPostPaths(sec.ReadPostPaths, origin); err != nil {
		return nil, err
	}
	if s.navTimeout, err = parseNavigationTimeout(sec.NavigationTimeoutS); err != nil {
		return nil, err
	}
	s.gate = newSignInGate(s.signIn.maxAttempts, signInHold(req.EffectTimeout))
	return s, nil
}

// bind returns a copy of s for one call: the record URL and the identity
// bound to params. A parameter the run does not supply, or a value that
// cannot stand where it goes (a path segment holding '/', an empty
// identifier), is a *refusal.Error: nothing is read.
func (s *settings) bind(params map[string]string) (*settings, error) {
	bound, err := s.urlParams.Bind(params)
	if err != nil {
		return nil, err
	}
	b := *s
	if b.recordURL, err = expandRecordURL(s.recordTmpl, bound, section); err != nil {
		return nil, err
	}
	const ip = section + ".identity.value"
	v, err := s.idValue.Bind(params, ip)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(v) == "" {
		return nil, configError(ip, "the identifier is empty; a record page cannot be told apart by an empty identifier")
	}
	b.identity.value, b.identity.raw = collapseSpace(v), v
	b.spell = spellings{params: params}
	return &b, nil
}

// section is the path of the adapter's own map inside its deployment
// section.
const section = "ui_readback"

// parseRecordURL reads record_url and url_params and checks them with a
// stand-in value for every parameter; it returns the site's origin
// (scheme://host), which no parameter can change.
func parseRecordURL(sec *sectionConfig) (string, param.Values, string, error) {
	const p = section
	tmpl, err := required(p+".record_url", sec.RecordURL)
	if err != nil {
		return "", param.Values{}, "", err
	}
	params := sec.URLParams
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	vs, err := param.ParseMap(params, p+".url_params")
	if err != nil {
		return "", param.Values{}, "", err
	}
	standIn := make(map[string]string, vs.Len())
	for _, name := range vs.Names() {
		standIn[name] = "x"
	}
	expanded, err := expandRecordURL(tmpl, standIn, p)
	if err != nil {
		return "", param.Values{}, "", err
	}
	u, _ := url.Parse(expanded)
	return tmpl, vs, u.Scheme + "://" + u.Host, nil
}

// parseSignIn reads sign_in: the page, its selectors and the read-back
// account's credentials, which the daemon delivered as secrets.
func parseSignIn(si *signInConfig, secrets map[string]string) (signIn, error) {
	const sp = section + ".sign_in"
	var out signIn
	if si == nil {
		return out, configError(sp, "missing: name the sign-in page, its selectors and the read-back account's environment variables (url, username_selector, password_selector, submit_selector, signed_in_selector, username_env, password_env)")
	}
	for _, k := range []struct {
		key string
		src *string
		dst *string
	}{
		{"url", si.URL, &out.url},
		{"username_selector", si.UsernameSelector, &out.usernameSelector},
		{"password_selector", si.PasswordSelector, &out.passwordSelector},
		{"submit_selector", si.SubmitSelector, &out.submitSelector},
		{"signed_in_selector", si.SignedInSelector, &out.signedInSelector},
	} {
		var err error
		if *k.dst, err = required(sp+"."+k.key, k.src); err != nil {
			return out, err
		}
	}
	if err := checkPageURL(out.url, sp+".url"); err != nil {
		return out, err
	}
	for _, k := range []struct {
		key, slot string
		src       *string
		dst       *string
	}{{"username_env", usernameSlot, si.UsernameEnv, &out.username}, {"password_env", passwordSlot, si.PasswordEnv, &out.password}} {
		name, err := required(sp+"."+k.key, k.src)
		if err != nil {
			return out, err
		}
		v, ok := secrets[k.slot]
		if !ok {
			return out, configError(sp+"."+k.key, "the daemon delivered no value for %s (environment variable %s); allow it under secrets.allow in the daemon config and set it", k.slot, name)
		}
		*k.dst = v
	}
	if out.username == "" {
		return out, configError(sp+".username_env", "the read-back account's user name is empty")
	}
	out.maxAttempts = DefaultSignInAttempts
	if n := si.MaxAttempts; n != nil {
		if *n < 1 || *n > maxSignInAttempts {
			return out, configError(sp+".max_attempts", "must be a whole number from 1 to %d: how many sign-ins whose credential the application rejects one read may make (1, the default, never tries a rejected credential again within the read)", maxSignInAttempts)
		}
		out.maxAttempts = *n
	}
	return out, nil
}

// parseIdentity reads where the page shows the record's identifier and
// binds the value it must show.
func parseIdentity(id *identityConfig) (identity, param.Value, error) {
	const ip = section + ".identity"
	var out identity
	if id == nil {
		return out, param.Value{}, configError(ip, "missing: say where the page shows the record's identifier (reader: {selector}) and what it must be (value: {param: ...})")
	}
	if id.Reader == nil {
		return out, param.Value{}, configError(ip+".reader", "missing: write reader: {selector: \"#patient-mrn\"} (and attribute: when the identifier is in an attribute)")
	}
	var err error
	if out.selector, err = required(ip+".reader.selector", id.Reader.Selector); err != nil {
		return out, param.Value{}, err
	}
	out.attribute = id.Reader.Attribute
	if id.Value == nil {
		return out, param.Value{}, configError(ip+".value", "missing: write the identifier the page must show, usually {param: patient_id}")
	}
	v, err := param.ParseJSON(id.Value, ip+".value")
	if err != nil {
		return out, param.Value{}, err
	}
	if !v.IsParam() && strings.TrimSpace(v.Literal) == "" {
		return out, param.Value{}, configError(ip+".value", "the identifier is empty; a record page cannot be told apart by an empty identifier")
	}
	out.field = id.Field
	return out, v, nil
}

// parseFields reads fields: where a row shows each record field, sorted by
// name. identityField is the field the identifier fills, which no other
// may name.
func parseFields(fs map[string]fieldConfig, identityField string, markers []string) ([]field, error) {
	const p = section + ".fields"
	if fs == nil {
		return nil, configError(p, "missing: map each record field to where a row shows it, e.g. id: {attribute: data-id}")
	}
	if len(fs) == 0 {
		return nil, configError(p, "empty: declare at least one field")
	}
	var out []field
	for _, name := range slices.Sorted(maps.Keys(fs)) {
		if strings.TrimSpace(name) == "" {
			return nil, configError(p, "a field name is empty")
		}
		if name == identityField {
			return nil, configError(p+"."+name, "identity.field already names %q: the record page's identifier fills it", name)
		}
		f, err := parseField(name, fs[name], p+"."+name, markers)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// parseField reads one entry of fields.
func parseField(name string, fc fieldConfig, fp string, markers []string) (field, error) {
	f := field{name: name, selector: fc.Selector, attribute: fc.Attribute, casefold: fc.Casefold}
	var err error
	if f.markers, err = parseTruncationMarkers(fc.TruncationMarkers, fp+".truncation_markers", markers); err != nil {
		return f, err
	}
	if f.selector == "" && f.attribute == "" {
		return f, configError(fp, "write a selector (the element inside the row whose text is the value), an attribute (of the row itself), or both")
	}
	if fc.DateFormat != "" {
		if f.layout, f.isoLayout, err = dateLayout(fc.DateFormat); err != nil {
			return f, configError(fp+".date_format", "%v", err)
		}
	}
	return f, nil
}

// parseReadPostPaths reads read_post_paths: the POST requests of the record
// site that only read, as origin+path.
func parseReadPostPaths(paths []string, origin string) ([]string, error) {
	const p = section + ".read_post_paths"
	var out []string
	for i, path := range paths {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return nil, configError(fmt.Sprintf("%s[%d]", p, i), "%q: write a path on the record page's site that starts with / and has no query, such as /graphql", path)
		}
		out = append(out, origin+path)
	}
	return out, nil
}

// parseTruncationMarkers reads a truncation_markers list at p: the
// section's (def is then DefaultTruncationMarkers) or a field's own, which
// replaces the section's (def) for that field.
func parseTruncationMarkers(markers []string, p string, def []string) ([]string, error) {
	if markers == nil {
		return def, nil
	}
	for i, m := range markers {
		if m == "" {
			return nil, configError(fmt.Sprintf("%s[%d]", p, i), "a marker is empty, which every value contains")
		}
	}
	return markers, nil
}

// parseNavigationTimeout reads navigation_timeout_s, DefaultNavigationTimeout
// when absent.
func parseNavigationTimeout(seconds *float64) (time.Duration, error) {
	if seconds == nil {
		return DefaultNavigationTimeout, nil
	}
	if f := *seconds; f <= 0 || f > maxNavigationTimeoutS {
		return 0, configError(section+".navigation_timeout_s", "must be a number of seconds above 0 and at most %d", maxNavigationTimeoutS)
	}
	return time.Duration(*seconds * float64(time.Second)), nil
}

// required returns the string a required key holds: present and not
// blank.
func required(path string, v *string) (string, error) {
	switch {
	case v == nil:
		return "", configError(path, "missing")
	case strings.TrimSpace(*v) == "":
		return "", configError(path, "must not be empty")
	}
	return *v, nil
}

// expandRecordURL fills the {name} placeholders of the record_url template
// with their bound url_params through param.Expand: a value before the
// query is exactly one path segment (never "", "." or "..", never holding
// '/' or '\'), a value after '?' or '#' is query-escaped, and neither may
// carry control characters. Placeholders may not stand in the scheme or
// host, so a parameter can never send the read elsewhere.
func expandRecordURL(tmpl string, bound map[string]string, p string) (string, error) {
	path := p + ".record_url"
	if err := checkPageURL(tmpl, path); err != nil {
		return "", err
	}
	// The scheme and host end at the first /, ? or # after "://".
	authority := strings.Index(tmpl, "://") + 3
	if end := strings.IndexAny(tmpl[authority:], "/?#"); end >= 0 {
		authority += end
	} else {
		authority = len(tmpl)
	}
	if strings.ContainsAny(tmpl[:authority], "{}") {
		return "", configError(path, "a placeholder may not stand in the scheme or host; the read-back only opens the configured site")
	}
	names := param.Names(tmpl)
	for _, name := range names {
		if _, ok := bound[name]; !ok {
			return "", configError(path, "placeholder {%s} has no entry under url_params; add %s: {param: ...}", name, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(bound)) {
		if !slices.Contains(names, name) {
			return "", configError(p+".url_params."+name, "record_url has no {%s} placeholder for it", name)
		}
	}
	expanded, err := param.Expand(tmpl, param.URL, param.Lookup(func(name string) (string, bool) {
		v, ok := bound[name]
		return v, ok
	}))
	if err != nil {
		return "", configError(path, "%v", err)
	}
	if _, err := url.Parse(expanded); err != nil {
		return "", configError(path, "the bound URL is not valid: %v", err)
	}
	return expanded, nil
}

// checkPageURL accepts an absolute http or https URL.
func checkPageURL(raw, path string) error {
	var filled strings.Builder
	last := 0
	for _, ph := range param.Placeholders(raw) {
		filled.WriteString(raw[last:ph.Start])
		filled.WriteString("x")
		last = ph.End
	}
	filled.WriteString(raw[last:])
	u, err := url.Parse(filled.String())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configError(path, "%q: write an absolute http:// or https:// URL", raw)
	}
	return nil
}

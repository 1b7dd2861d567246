package uireadback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
)

// The secret slots the daemon fills from the deployment's *_env keys.
const (
	usernameSlot = "ui_readback.sign_in.username_env"
	passwordSlot = "ui_readback.sign_in.password_env"
)

// DefaultTruncationMarkers mark a value the page shortened.
var DefaultTruncationMarkers = []string{"…", "..."}

// DefaultNavigationTimeout bounds each wait of a read-back (a page load, the
// sign-in, the record page becoming ready) when navigation_timeout_s is not
// set. The effect's own deadline bounds the whole read as well.
const DefaultNavigationTimeout = 15 * time.Second

// maxNavigationTimeoutS is the largest navigation_timeout_s accepted.
const maxNavigationTimeoutS = 600

// The keys each level of the section accepts.
var (
	topKeys      = []string{"kind", "ui_readback"}
	sectionKeys  = []string{"record_url", "url_params", "sign_in", "ready_selector", "empty_selector", "not_found_selector", "row_selector", "fields", "identity", "read_post_paths", "truncation_markers", "navigation_timeout_s"}
	signInKeys   = []string{"url", "username_selector", "password_selector", "submit_selector", "signed_in_selector", "username_env", "password_env"}
	fieldKeys    = []string{"selector", "attribute", "date_format", "casefold"}
	identityKeys = []string{"reader", "value", "field"}
	readerKeys   = []string{"selector", "attribute"}
)

// settings is a configuration resolved at Configure, every secret in hand.
// It never changes afterwards; bind copies it with one call's run
// parameters bound.
type settings struct {
	recordTmpl       string       // record_url, placeholders unfilled
	urlParams        param.Values // url_params, bound per call
	idValue          param.Value  // identity.value, bound per call
	recordURL        string       // the record page, parameters bound and escaped (bound copies only)
	signIn           signIn
	readySelector    string
	emptySelector    string
	notFoundSelector string
	rowSelector      string
	fields           []field // sorted by name
	identity         identity
	readPostPaths    []string // origin+path of the record site
	truncation       []string
	navTimeout       time.Duration
}

type signIn struct {
	url              string
	usernameSelector string
	passwordSelector string
	submitSelector   string
	signedInSelector string
	username         string // secret
	password         string // secret
}

type field struct {
	name      string
	selector  string // "" reads the row element itself
	attribute string // "" reads the element's text
	layout    string // Go layout from date_format; "" for none
	isoLayout string // the ISO 8601 layout the parsed date is written in
	casefold  bool
}

type identity struct {
	selector  string
	attribute string
	value     string // bound (bound copies only)
	field     string // record field that carries it; "" adds none
}

// configError is a refusal at a path inside the section.
func configError(path, format string, args ...any) error {
	return &sdk.ConfigError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// parseSettings reads and checks the deployment section and takes its
// secrets, one part of the section at a time; the run parameters are bound
// per call (bind).
func parseSettings(req sdk.ConfigureRequest) (*settings, error) {
	sec, err := readSection(req.Config)
	if err != nil {
		return nil, err
	}
	s := &settings{}
	var origin string
	if s.recordTmpl, s.urlParams, origin, err = parseRecordURL(sec); err != nil {
		return nil, err
	}
	if s.signIn, err = parseSignIn(sec, req.Secrets); err != nil {
		return nil, err
	}
	if err := parseSelectors(sec, s); err != nil {
		return nil, err
	}
	// identity before fields, so a field cannot shadow identity.field
	if s.identity, s.idValue, err = parseIdentity(sec); err != nil {
		return nil, err
	}
	if s.fields, err = parseFields(sec, s.identity.field); err != nil {
		return nil, err
	}
	if s.readPostPaths, err = parseReadPostPaths(sec, origin); err != nil {
		return nil, err
	}
	if s.truncation, err = parseTruncationMarkers(sec); err != nil {
		return nil, err
	}
	if s.navTimeout, err = parseNavigationTimeout(sec); err != nil {
		return nil, err
	}
	return s, nil
}

// bind returns a copy of s for one call: the record URL and the identity
// bound to params. A parameter the run does not supply, or a value that
// cannot stand where it goes (a path segment holding '/', an empty
// identifier), is a *sdk.ConfigError: nothing is read.
func (s *settings) bind(params map[string]string) (*settings, error) {
	bound, err := s.urlParams.Bind(params)
	if err != nil {
		return nil, paramError(err)
	}
	b := *s
	if b.recordURL, err = expandRecordURL(s.recordTmpl, bound, section); err != nil {
		return nil, err
	}
	const ip = section + ".identity.value"
	v, err := s.idValue.Bind(params, ip)
	if err != nil {
		return nil, paramError(err)
	}
	if strings.TrimSpace(v) == "" {
		return nil, configError(ip, "the identifier is empty; a record page cannot be told apart by an empty identifier")
	}
	b.identity.value = collapseSpace(v)
	return &b, nil
}

// CheckParams binds a session's run parameters into the record URL and the
// identity without opening anything.
func (a *Adapter) CheckParams(_ context.Context, params map[string]string) error {
	return sdk.CheckParams(&a.settings, params, (*settings).bind)
}

// section is the path of the adapter's own map inside its deployment
// section.
const section = "ui_readback"

// readSection checks kind and returns the ui_readback: map.
func readSection(config json.RawMessage) (map[string]json.RawMessage, error) {
	top, err := object(config, "", topKeys)
	if err != nil {
		return nil, err
	}
	if raw, ok := top["kind"]; ok {
		var kind string
		if json.Unmarshal(raw, &kind) != nil || kind != Kind {
			return nil, configError("kind", "this adapter reads kind %q", Kind)
		}
	}
	raw, ok := top[section]
	if !ok {
		return nil, configError(section, "missing: the ui_readback: section holds record_url, sign_in, ready_selector, row_selector, fields and identity")
	}
	return object(raw, section, sectionKeys)
}

// parseRecordURL reads record_url and url_params and checks them with a
// stand-in value for every parameter; it returns the site's origin
// (scheme://host), which no parameter can change.
func parseRecordURL(sec map[string]json.RawMessage) (string, param.Values, string, error) {
	const p = section
	var tmpl string
	if err := str(sec, "record_url", p, true, &tmpl); err != nil {
		return "", param.Values{}, "", err
	}
	params := map[string]json.RawMessage{}
	if rawParams, ok := sec["url_params"]; ok {
		var err error
		if params, err = object(rawParams, p+".url_params", nil); err != nil {
			return "", param.Values{}, "", err
		}
	}
	vs, err := param.ParseMap(params, p+".url_params")
	if err != nil {
		return "", param.Values{}, "", paramError(err)
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
func parseSignIn(sec map[string]json.RawMessage, secrets map[string]string) (signIn, error) {
	const sp = section + ".sign_in"
	var out signIn
	rawSignIn, ok := sec["sign_in"]
	if !ok {
		return out, configError(sp, "missing: name the sign-in page, its selectors and the read-back account's environment variables (url, username_selector, password_selector, submit_selector, signed_in_selector, username_env, password_env)")
	}
	si, err := object(rawSignIn, sp, signInKeys)
	if err != nil {
		return out, err
	}
	for _, k := range []struct {
		key string
		dst *string
	}{
		{"url", &out.url},
		{"username_selector", &out.usernameSelector},
		{"password_selector", &out.passwordSelector},
		{"submit_selector", &out.submitSelector},
		{"signed_in_selector", &out.signedInSelector},
	} {
		if err := str(si, k.key, sp, true, k.dst); err != nil {
			return out, err
		}
	}
	if err := checkPageURL(out.url, sp+".url"); err != nil {
		return out, err
	}
	for _, k := range []struct {
		key, slot string
		dst       *string
	}{{"username_env", usernameSlot, &out.username}, {"password_env", passwordSlot, &out.password}} {
		var name string
		if err := str(si, k.key, sp, true, &name); err != nil {
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
	return out, nil
}

// parseSelectors reads the selectors that say where the page is ready,
// empty or missing, and where its rows are.
func parseSelectors(sec map[string]json.RawMessage, s *settings) error {
	for _, k := range []struct {
		key      string
		required bool
		dst      *string
	}{
		{"ready_selector", true, &s.readySelector},
		{"row_selector", true, &s.rowSelector},
		{"empty_selector", false, &s.emptySelector},
		{"not_found_selector", false, &s.notFoundSelector},
	} {
		if err := str(sec, k.key, section, k.required, k.dst); err != nil {
			return err
		}
	}
	return nil
}

// parseIdentity reads where the page shows the record's identifier and
// binds the value it must show.
func parseIdentity(sec map[string]json.RawMessage) (identity, param.Value, error) {
	const ip = section + ".identity"
	var out identity
	rawID, ok := sec["identity"]
	if !ok {
		return out, param.Value{}, configError(ip, "missing: say where the page shows the record's identifier (reader: {selector}) and what it must be (value: {param: ...})")
	}
	id, err := object(rawID, ip, identityKeys)
	if err != nil {
		return out, param.Value{}, err
	}
	rawReader, ok := id["reader"]
	if !ok {
		return out, param.Value{}, configError(ip+".reader", "missing: write reader: {selector: \"#patient-mrn\"} (and attribute: when the identifier is in an attribute)")
	}
	rd, err := object(rawReader, ip+".reader", readerKeys)
	if err != nil {
		return out, param.Value{}, err
	}
	if err := str(rd, "selector", ip+".reader", true, &out.selector); err != nil {
		return out, param.Value{}, err
	}
	if err := str(rd, "attribute", ip+".reader", false, &out.attribute); err != nil {
		return out, param.Value{}, err
	}
	rawValue, ok := id["value"]
	if !ok {
		return out, param.Value{}, configError(ip+".value", "missing: write the identifier the page must show, usually {param: patient_id}")
	}
	v, err := param.ParseJSON(rawValue, ip+".value")
	if err != nil {
		return out, param.Value{}, paramError(err)
	}
	if !v.IsParam() && strings.TrimSpace(v.Literal) == "" {
		return out, param.Value{}, configError(ip+".value", "the identifier is empty; a record page cannot be told apart by an empty identifier")
	}
	if err := str(id, "field", ip, false, &out.field); err != nil {
		return out, param.Value{}, err
	}
	return out, v, nil
}

// parseFields reads fields: where a row shows each record field, sorted by
// name. identityField is the field the identifier fills, which no other
// may name.
func parseFields(sec map[string]json.RawMessage, identityField string) ([]field, error) {
	const p = section + ".fields"
	rawFields, ok := sec["fields"]
	if !ok {
		return nil, configError(p, "missing: map each record field to where a row shows it, e.g. id: {attribute: data-id}")
	}
	fs, err := object(rawFields, p, nil)
	if err != nil {
		return nil, err
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
		f, err := parseField(name, fs[name], p+"."+name)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// parseField reads one entry of fields.
func parseField(name string, raw json.RawMessage, fp string) (field, error) {
	f := field{name: name}
	fm, err := object(raw, fp, fieldKeys)
	if err != nil {
		return f, err
	}
	if err := str(fm, "selector", fp, false, &f.selector); err != nil {
		return f, err
	}
	if err := str(fm, "attribute", fp, false, &f.attribute); err != nil {
		return f, err
	}
	if f.selector == "" && f.attribute == "" {
		return f, configError(fp, "write a selector (the element inside the row whose text is the value), an attribute (of the row itself), or both")
	}
	var df string
	if err := str(fm, "date_format", fp, false, &df); err != nil {
		return f, err
	}
	if df != "" {
		if f.layout, f.isoLayout, err = dateLayout(df); err != nil {
			return f, configError(fp+".date_format", "%v", err)
		}
	}
	if rawCF, ok := fm["casefold"]; ok {
		if json.Unmarshal(rawCF, &f.casefold) != nil {
			return f, configError(fp+".casefold", "must be true or false")
		}
	}
	return f, nil
}

// parseReadPostPaths reads read_post_paths: the POST requests of the record
// site that only read, as origin+path.
func parseReadPostPaths(sec map[string]json.RawMessage, origin string) ([]string, error) {
	const p = section + ".read_post_paths"
	rawPaths, ok := sec["read_post_paths"]
	if !ok {
		return nil, nil
	}
	var paths []string
	if json.Unmarshal(rawPaths, &paths) != nil {
		return nil, configError(p, "must be a list of paths such as /graphql")
	}
	var out []string
	for i, path := range paths {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return nil, configError(fmt.Sprintf("%s[%d]", p, i), "%q: write a path on the record page's site that starts with / and has no query, such as /graphql", path)
		}
		out = append(out, origin+path)
	}
	return out, nil
}

// parseTruncationMarkers reads truncation_markers, DefaultTruncationMarkers
// when absent.
func parseTruncationMarkers(sec map[string]json.RawMessage) ([]string, error) {
	const p = section + ".truncation_markers"
	rawMarkers, ok := sec["truncation_markers"]
	if !ok {
		return DefaultTruncationMarkers, nil
	}
	var markers []string
	if json.Unmarshal(rawMarkers, &markers) != nil || markers == nil {
		return nil, configError(p, "must be a list of strings, such as [\"…\", \"...\"]; write [] for none")
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
func parseNavigationTimeout(sec map[string]json.RawMessage) (time.Duration, error) {
	rawT, ok := sec["navigation_timeout_s"]
	if !ok {
		return DefaultNavigationTimeout, nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(rawT))
	dec.UseNumber()
	f, err := 0.0, dec.Decode(&n)
	if err == nil {
		f, err = n.Float64()
	}
	if err != nil || f <= 0 || f > maxNavigationTimeoutS {
		return 0, configError(section+".navigation_timeout_s", "must be a number of seconds above 0 and at most %d", maxNavigationTimeoutS)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// object decodes raw as a JSON object and, when allowed is not nil, refuses
// keys outside it.
func object(raw json.RawMessage, path string, allowed []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		where := path
		if where == "" {
			where = "the section"
		}
		return nil, configError(path, "%s must be a map", where)
	}
	if allowed != nil {
		if err := sdk.RefuseUnknownKeys(Kind, path, m, allowed); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// str reads a string key. A required key must be present and not blank.
func str(m map[string]json.RawMessage, key, path string, required bool, dst *string) error {
	raw, ok := m[key]
	if !ok {
		if required {
			return configError(join(path, key), "missing")
		}
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return configError(join(path, key), "must be a string")
	}
	if required && strings.TrimSpace(*dst) == "" {
		return configError(join(path, key), "must not be empty")
	}
	return nil
}

// bindValue reads "text", {literal: "text"} or {param: name} (the grammar
// of sdk/param) and binds it.
// paramError turns a *param.Error into the *sdk.ConfigError an adapter
// returns.
func paramError(err error) error {
	if perr, ok := errors.AsType[*param.Error](err); ok {
		return configError(perr.Path, "%s", perr.Message)
	}
	return err
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
	expanded, err := param.Expand(tmpl, param.URL, func(name string) (string, bool) {
		v, ok := bound[name]
		return v, ok
	})
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

package uireadback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
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

// settings is a configuration resolved for one run: every parameter bound,
// every secret in hand. It never changes after Configure.
type settings struct {
	recordURL        string // the record page, parameters bound and escaped
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
	value     string // bound
	field     string // record field that carries it; "" adds none
}

// configError is a refusal at a path inside the section.
func configError(path, format string, args ...any) error {
	return &sdk.ConfigError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// parseSettings reads and checks the deployment section and binds it to the
// run's parameters and secrets.
func parseSettings(req sdk.ConfigureRequest) (*settings, error) {
	top, err := object(req.Config, "", topKeys)
	if err != nil {
		return nil, err
	}
	if raw, ok := top["kind"]; ok {
		var kind string
		if json.Unmarshal(raw, &kind) != nil || kind != Kind {
			return nil, configError("kind", "this adapter reads kind %q", Kind)
		}
	}
	raw, ok := top["ui_readback"]
	if !ok {
		return nil, configError("ui_readback", "missing: the ui_readback: section holds record_url, sign_in, ready_selector, row_selector, fields and identity")
	}
	const p = "ui_readback"
	sec, err := object(raw, p, sectionKeys)
	if err != nil {
		return nil, err
	}
	s := &settings{}

	// record_url and url_params
	var tmpl string
	if err := str(sec, "record_url", p, true, &tmpl); err != nil {
		return nil, err
	}
	params := map[string]json.RawMessage{}
	if rawParams, ok := sec["url_params"]; ok {
		if params, err = object(rawParams, p+".url_params", nil); err != nil {
			return nil, err
		}
	}
	bound := map[string]string{}
	for _, name := range sortedKeys(params) {
		v, err := bindValue(params[name], p+".url_params."+name, req.Params)
		if err != nil {
			return nil, err
		}
		bound[name] = v
	}
	if s.recordURL, err = expandRecordURL(tmpl, bound, p); err != nil {
		return nil, err
	}
	recordOrigin, _ := url.Parse(s.recordURL)

	// sign_in
	rawSignIn, ok := sec["sign_in"]
	if !ok {
		return nil, configError(p+".sign_in", "missing: name the sign-in page, its selectors and the read-back account's environment variables (url, username_selector, password_selector, submit_selector, signed_in_selector, username_env, password_env)")
	}
	si, err := object(rawSignIn, p+".sign_in", signInKeys)
	if err != nil {
		return nil, err
	}
	sp := p + ".sign_in"
	for _, k := range []struct {
		key string
		dst *string
	}{
		{"url", &s.signIn.url},
		{"username_selector", &s.signIn.usernameSelector},
		{"password_selector", &s.signIn.passwordSelector},
		{"submit_selector", &s.signIn.submitSelector},
		{"signed_in_selector", &s.signIn.signedInSelector},
	} {
		if err := str(si, k.key, sp, true, k.dst); err != nil {
			return nil, err
		}
	}
	if err := checkPageURL(s.signIn.url, sp+".url"); err != nil {
		return nil, err
	}
	for _, k := range []struct{ key, slot string }{{"username_env", usernameSlot}, {"password_env", passwordSlot}} {
		var name string
		if err := str(si, k.key, sp, true, &name); err != nil {
			return nil, err
		}
		v, ok := req.Secrets[k.slot]
		if !ok {
			return nil, configError(sp+"."+k.key, "the daemon delivered no value for %s (environment variable %s); allow it under secrets.allow in the daemon config and set it", k.slot, name)
		}
		if k.key == "username_env" {
			s.signIn.username = v
		} else {
			s.signIn.password = v
		}
	}
	if s.signIn.username == "" {
		return nil, configError(sp+".username_env", "the read-back account's user name is empty")
	}

	// selectors
	if err := str(sec, "ready_selector", p, true, &s.readySelector); err != nil {
		return nil, err
	}
	if err := str(sec, "row_selector", p, true, &s.rowSelector); err != nil {
		return nil, err
	}
	if err := str(sec, "empty_selector", p, false, &s.emptySelector); err != nil {
		return nil, err
	}
	if err := str(sec, "not_found_selector", p, false, &s.notFoundSelector); err != nil {
		return nil, err
	}

	// identity (before fields, so a field cannot shadow identity.field)
	rawID, ok := sec["identity"]
	if !ok {
		return nil, configError(p+".identity", "missing: say where the page shows the record's identifier (reader: {selector}) and what it must be (value: {param: ...})")
	}
	ip := p + ".identity"
	id, err := object(rawID, ip, identityKeys)
	if err != nil {
		return nil, err
	}
	rawReader, ok := id["reader"]
	if !ok {
		return nil, configError(ip+".reader", "missing: write reader: {selector: \"#patient-mrn\"} (and attribute: when the identifier is in an attribute)")
	}
	rd, err := object(rawReader, ip+".reader", readerKeys)
	if err != nil {
		return nil, err
	}
	if err := str(rd, "selector", ip+".reader", true, &s.identity.selector); err != nil {
		return nil, err
	}
	if err := str(rd, "attribute", ip+".reader", false, &s.identity.attribute); err != nil {
		return nil, err
	}
	rawValue, ok := id["value"]
	if !ok {
		return nil, configError(ip+".value", "missing: write the identifier the page must show, usually {param: patient_id}")
	}
	if s.identity.value, err = bindValue(rawValue, ip+".value", req.Params); err != nil {
		return nil, err
	}
	if strings.TrimSpace(s.identity.value) == "" {
		return nil, configError(ip+".value", "the identifier is empty; a record page cannot be told apart by an empty identifier")
	}
	s.identity.value = collapseSpace(s.identity.value)
	if err := str(id, "field", ip, false, &s.identity.field); err != nil {
		return nil, err
	}

	// fields
	rawFields, ok := sec["fields"]
	if !ok {
		return nil, configError(p+".fields", "missing: map each record field to where a row shows it, e.g. id: {attribute: data-id}")
	}
	fs, err := object(rawFields, p+".fields", nil)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, configError(p+".fields", "empty: declare at least one field")
	}
	for _, name := range sortedKeys(fs) {
		fp := p + ".fields." + name
		if strings.TrimSpace(name) == "" {
			return nil, configError(p+".fields", "a field name is empty")
		}
		if name == s.identity.field {
			return nil, configError(fp, "identity.field already names %q: the record page's identifier fills it", name)
		}
		fm, err := object(fs[name], fp, fieldKeys)
		if err != nil {
			return nil, err
		}
		f := field{name: name}
		if err := str(fm, "selector", fp, false, &f.selector); err != nil {
			return nil, err
		}
		if err := str(fm, "attribute", fp, false, &f.attribute); err != nil {
			return nil, err
		}
		if f.selector == "" && f.attribute == "" {
			return nil, configError(fp, "write a selector (the element inside the row whose text is the value), an attribute (of the row itself), or both")
		}
		var df string
		if err := str(fm, "date_format", fp, false, &df); err != nil {
			return nil, err
		}
		if df != "" {
			if f.layout, f.isoLayout, err = dateLayout(df); err != nil {
				return nil, configError(fp+".date_format", "%v", err)
			}
		}
		if rawCF, ok := fm["casefold"]; ok {
			if json.Unmarshal(rawCF, &f.casefold) != nil {
				return nil, configError(fp+".casefold", "must be true or false")
			}
		}
		s.fields = append(s.fields, f)
	}

	// read_post_paths
	if rawPaths, ok := sec["read_post_paths"]; ok {
		var paths []string
		if json.Unmarshal(rawPaths, &paths) != nil {
			return nil, configError(p+".read_post_paths", "must be a list of paths such as /graphql")
		}
		for i, path := range paths {
			if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
				return nil, configError(fmt.Sprintf("%s.read_post_paths[%d]", p, i), "%q: write a path on the record page's site that starts with / and has no query, such as /graphql", path)
			}
			s.readPostPaths = append(s.readPostPaths, recordOrigin.Scheme+"://"+recordOrigin.Host+path)
		}
	}

	// truncation_markers
	s.truncation = DefaultTruncationMarkers
	if rawMarkers, ok := sec["truncation_markers"]; ok {
		var markers []string
		if json.Unmarshal(rawMarkers, &markers) != nil || markers == nil {
			return nil, configError(p+".truncation_markers", "must be a list of strings, such as [\"…\", \"...\"]; write [] for none")
		}
		for i, m := range markers {
			if m == "" {
				return nil, configError(fmt.Sprintf("%s.truncation_markers[%d]", p, i), "a marker is empty, which every value contains")
			}
		}
		s.truncation = markers
	}

	// navigation_timeout_s
	s.navTimeout = DefaultNavigationTimeout
	if rawT, ok := sec["navigation_timeout_s"]; ok {
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(rawT))
		dec.UseNumber()
		f, err := 0.0, dec.Decode(&n)
		if err == nil {
			f, err = n.Float64()
		}
		if err != nil || f <= 0 || f > maxNavigationTimeoutS {
			return nil, configError(p+".navigation_timeout_s", "must be a number of seconds above 0 and at most %d", maxNavigationTimeoutS)
		}
		s.navTimeout = time.Duration(f * float64(time.Second))
	}
	return s, nil
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
		for _, k := range sortedKeys(m) {
			if !contains(allowed, k) {
				return nil, configError(join(path, k), "unknown key; the keys here are %s", strings.Join(allowed, ", "))
			}
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
func bindValue(raw json.RawMessage, path string, params map[string]string) (string, error) {
	v, err := param.BindJSON(raw, path, params)
	if err != nil {
		var perr *param.Error
		if errors.As(err, &perr) {
			return "", configError(perr.Path, "%s", perr.Message)
		}
		return "", err
	}
	return v, nil
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
	for _, name := range sortedKeys(bound) {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

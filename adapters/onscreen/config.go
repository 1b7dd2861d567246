package onscreen

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Defaults.
const (
	defaultMinRatio      = 0.9
	defaultMinConfidence = 60
	defaultNavTimeout    = 10 * time.Second
)

// section is the deployment's `onscreen:` section as written.
type section struct {
	Screen           *screenSection  `json:"screen"`
	Renavigate       []actionSection `json:"renavigate"`
	SameSurface      bool            `json:"same_surface"`
	AbsentSelector   string          `json:"absent_selector"`
	RowSelector      string          `json:"row_selector"`
	ReadySelector    string          `json:"ready_selector"`
	Fields           []fieldSection  `json:"fields"`
	ReadPostPaths    []string        `json:"read_post_paths"`
	MinRatio         *float64        `json:"readback_min_ratio"`
	MinConfidence    *float64        `json:"ocr_min_confidence"`
	NavigationTimout *float64        `json:"navigation_timeout_s"`
}

type screenSection struct {
	CDPURL        string `json:"cdp_url"`
	CDPURLEnv     string `json:"cdp_url_env"`
	Display       string `json:"display"`
	PageURLPrefix string `json:"page_url_prefix"`
}

type actionSection struct {
	Open  string       `json:"open"`
	Click string       `json:"click"`
	Type  *typeSection `json:"type"`
	Wait  *waitSection `json:"wait"`
}

type typeSection struct {
	Selector string `json:"selector"`
	Param    string `json:"param"`
}

type waitSection struct {
	Selector string `json:"selector"`
	Text     string `json:"text"`
}

type fieldSection struct {
	Param    string   `json:"param"`
	Region   []int    `json:"region"`
	Selector string   `json:"selector"`
	MinRatio *float64 `json:"min_ratio"`
}

// settings are the checked configuration configure returns and Define
// stores; each call reads through a copy bound to its run parameters
// (bind).
type settings struct {
	cdpURL         string
	display        string // an X display (":99"), the other source
	pageURLPrefix  string
	tier           sdk.Tier
	renavigate     []actionSection // as written; bound per call
	actions        []action        // bound copies: the run's values; else stand-ins
	absent         string
	rows           string   // row_selector: one record per visible row; "" for one record
	ready          string   // ready_selector: the fields are read once it is shown; "" for none
	readPosts      []string // read_post_paths as origin+path: POSTs the re-opened page may make (the page guard)
	readPostsExact []string // the same with their query, if any: the network guard lets through only these exactly
	fields         []field
	minConfidence  float64
	navTimeout     time.Duration
}

// action is one step of the re-navigation, bound to the run.
type action struct {
	kind     string // open, click, type, wait
	url      string // open
	selector string // click, type, wait
	text     string // type: the run parameter's value; wait: the text to wait for
}

func (a action) String() string {
	switch a.kind {
	case "open":
		return "open " + a.url
	case "type":
		return "type into " + a.selector
	case "wait":
		if a.selector != "" {
			return "wait for " + a.selector
		}
		return "wait for the text " + fmt.Sprintf("%q", a.text)
	}
	return a.kind + " " + a.selector
}

// field is one marked field, bound to the run: the record field it fills
// (the parameter's name) and the value the run typed.
type field struct {
	param    string
	path     string // of its param key, for refusals
	expected string // bound copies only
	region   *[4]int
	selector string
	minRatio float64
}

func configError(path, format string, args ...any) error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// cdpSecretSlot is the secret slot the daemon fills from screen.cdp_url_env.
const cdpSecretSlot = Kind + ".screen.cdp_url_env"

var displayName = regexp.MustCompile(`^:[0-9]{1,4}(\.[0-9]{1,2})?$`)

// config is the adapter's section as the daemon passes it: everything sits
// under onscreen:. Define decodes it with the SDK's strict decoder, which
// refuses an unknown key at any depth with its path, the keys allowed there
// and the one probably meant, and checks the section's kind.
type config struct {
	OnScreen *section `json:"onscreen"`
}

// configure checks the section into the settings every call binds its run
// parameters into. The tier comes from what the section makes the read do:
// a re-navigation of two actions or more re-opens the record (tier 3);
// reading the surface the save left is tier 4 and must be asked for with
// same_surface: true. It opens nothing.
func configure(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	if cfg.OnScreen == nil {
		return nil, configError(Kind, "missing: the onscreen: section holds screen, fields and either renavigate (two actions or more) or same_surface: true")
	}
	sec := *cfg.OnScreen
	s := &settings{minConfidence: defaultMinConfidence, navTimeout: defaultNavTimeout}
	if err := s.parseScreen(sec, req.Secrets); err != nil {
		return nil, err
	}
	minRatio, err := s.parseLimits(sec)
	if err != nil {
		return nil, err
	}
	if err := s.parseNavigation(sec); err != nil {
		return nil, err
	}
	if err := s.parseFields(sec.Fields, minRatio); err != nil {
		return nil, err
	}
	if err := s.parseRows(sec.RowSelector); err != nil {
		return nil, err
	}
	if err := s.parseReady(sec.ReadySelector); err != nil {
		return nil, err
	}
	if err := s.parseReadPosts(sec.ReadPostPaths); err != nil {
		return nil, err
	}
	if _, err := modelPath(); err != nil && s.hasRegion() {
		return nil, configError(Kind+".fields", "%v", err)
	}
	if s.display != "" {
		if _, err := xwdPath(); err != nil {
			return nil, configError(Kind+".screen.display", "%v", err)
		}
	}
	return s, nil
}

// hasRegion reports whether a field is read by OCR.
func (s *settings) hasRegion() bool {
	for _, f := range s.fields {
		if f.region != nil {
			return true
		}
	}
	return false
}

// parseScreen reads where the application's screen is: a local X display,
// or the DevTools address of the Chromium the automation drives (written,
// or from the secret slot screen.cdp_url_env fills).
func (s *settings) parseScreen(sec section, secrets map[string]string) error {
	sp := Kind + ".screen"
	if sec.Screen == nil {
		return configError(sp, "missing: say where the application's screen is: cdp_url or cdp_url_env (a Chromium the automation drives)")
	}
	switch {
	case sec.Screen.Display != "" && (sec.Screen.CDPURL != "" || sec.Screen.CDPURLEnv != ""):
		return configError(sp, "give one source: display, or cdp_url / cdp_url_env")
	case sec.Screen.Display != "":
		if !displayName.MatchString(sec.Screen.Display) {
			return configError(sp+".display", "write a local X display such as \":99\" (a display on another host is not read)")
		}
		if sec.Screen.PageURLPrefix != "" {
			return configError(sp+".page_url_prefix", "an X display has no tabs; remove page_url_prefix")
		}
		if len(sec.Renavigate) > 0 {
			return configError(Kind+".renavigate", "an X display is only read, never driven: re-navigation needs the DevTools source (cdp_url); remove renavigate and say same_surface: true")
		}
		s.display = sec.Screen.Display
	case sec.Screen.CDPURL != "" && sec.Screen.CDPURLEnv != "":
		return configError(sp, "give one of cdp_url and cdp_url_env, not both")
	case sec.Screen.CDPURL != "":
		s.cdpURL = sec.Screen.CDPURL
	case sec.Screen.CDPURLEnv != "":
		v, ok := secrets[cdpSecretSlot]
		if !ok || v == "" {
			return configError(sp+".cdp_url_env", "the daemon passed no value for %s; set the variable in the daemon's environment and allow it", sec.Screen.CDPURLEnv)
		}
		s.cdpURL = v
	default:
		return configError(sp, "missing: cdp_url or cdp_url_env (the DevTools address of the Chromium the automation drives, such as http://127.0.0.1:9222)")
	}
	if u, err := url.Parse(s.cdpURL); s.display == "" && (err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "ws")) {
		// The URL may come from a secret: never quote it.
		return configError(sp, "the DevTools address must be an http:// or ws:// URL with a host, such as http://127.0.0.1:9222")
	}
	s.pageURLPrefix = sec.Screen.PageURLPrefix
	return nil
}

// parseLimits reads navigation_timeout_s and ocr_min_confidence into s and
// returns readback_min_ratio (each field's default).
func (s *settings) parseLimits(sec section) (float64, error) {
	if t := sec.NavigationTimout; t != nil {
		if *t <= 0 || *t > 300 {
			return 0, configError(Kind+".navigation_timeout_s", "must be above 0 and at most 300 seconds")
		}
		s.navTimeout = time.Duration(*t * float64(time.Second))
	}
	if c := sec.MinConfidence; c != nil {
		if *c < 0 || *c > 100 {
			return 0, configError(Kind+".ocr_min_confidence", "must be between 0 and 100 (Tesseract's word confidence)")
		}
		s.minConfidence = *c
	}
	minRatio := defaultMinRatio
	if r := sec.MinRatio; r != nil {
		if *r <= 0 || *r > 1 {
			return 0, configError(Kind+".readback_min_ratio", "must be above 0 and at most 1 (1 asks for an exact read)")
		}
		minRatio = *r
	}
	return minRatio, nil
}

// parseNavigation reads renavigate, same_surface and absent_selector and
// sets the tier. The actions are checked with a stand-in for every run
// parameter they use; bind fills them per call.
func (s *settings) parseNavigation(sec section) error {
	s.renavigate = sec.Renavigate
	for i, as := range sec.Renavigate {
		a, err := bindAction(as, fmt.Sprintf("%s.renavigate[%d]", Kind, i), standIns(as))
		if err != nil {
			return err
		}
		s.actions = append(s.actions, a)
	}
	switch {
	case len(s.actions) >= 2:
		s.tier = sdk.TierReacquiredState
		if sec.SameSurface {
			return configError(Kind+".same_surface", "a read-back that re-navigates does not read the save's own surface; remove same_surface or the renavigate list")
		}
		if s.actions[0].kind != "open" {
			return configError(Kind+".renavigate[0]", "the re-navigation must begin with open: a URL, so that it re-opens the record rather than reading the screen the save left")
		}
	case len(s.actions) == 1:
		return configError(Kind+".renavigate", "one action does not re-open a record; give two actions or more (open a URL, then wait for the record), or none with same_surface: true")
	case !sec.SameSurface:
		return configError(Kind+".same_surface", "without a renavigate list the read-back reads the screen the save left (tier 4, screen consistency only); say same_surface: true to accept that, or add renavigate actions that re-open the record")
	default:
		s.tier = sdk.TierScreenConsistency
	}
	if sec.AbsentSelector != "" {
		if s.tier != sdk.TierReacquiredState {
			return configError(Kind+".absent_selector", "only a read-back that re-opens the record can see that it does not exist; remove it")
		}
		if err := checkSelector(sec.AbsentSelector, Kind+".absent_selector"); err != nil {
			return err
		}
		s.absent = sec.AbsentSelector
	}
	return nil
}

// parseFields reads the marked fields: each names a run parameter once and
// is read from a region (OCR) or a selector (the page structure).
func (s *settings) parseFields(fields []fieldSection, minRatio float64) error {
	if len(fields) == 0 {
		return configError(Kind+".fields", "missing: mark at least one field: {param: NAME, region: [x, y, w, h]} or {param: NAME, selector: CSS}")
	}
	seen := map[string]bool{}
	for i, fs := range fields {
		p := fmt.Sprintf("%s.fields[%d]", Kind, i)
		if fs.Param == "" {
			return configError(p+".param", "missing: the run parameter whose value this field shows")
		}
		if fs.Param == "id" {
			return configError(p+".param", `"id" is the record field the adapter sets itself (the page's identity); mark another parameter`)
		}
		if seen[fs.Param] {
			return configError(p+".param", "%q is marked twice; mark each parameter once", fs.Param)
		}
		seen[fs.Param] = true
		f := field{param: fs.Param, path: p + ".param", minRatio: minRatio}
		if fs.MinRatio != nil {
			if *fs.MinRatio <= 0 || *fs.MinRatio > 1 {
				return configError(p+".min_ratio", "must be above 0 and at most 1")
			}
			f.minRatio = *fs.MinRatio
		}
		switch {
		case fs.Region != nil && fs.Selector != "":
			return configError(p, "give region or selector, not both")
		case fs.Region != nil:
			if len(fs.Region) != 4 || fs.Region[0] < 0 || fs.Region[1] < 0 || fs.Region[2] < 4 || fs.Region[3] < 4 || fs.Region[2] > 4000 || fs.Region[3] > 1000 {
				return configError(p+".region", "write [x, y, width, height] in CSS pixels of the viewport, width and height at least 4")
			}
			f.region = &[4]int{fs.Region[0], fs.Region[1], fs.Region[2], fs.Region[3]}
		case fs.Selector != "":
			if err := checkSelector(fs.Selector, p+".selector"); err != nil {
				return err
			}
			f.selector = fs.Selector
		default:
			return configError(p, "missing: region: [x, y, w, h] (read by OCR) or selector: CSS (read from the page structure)")
		}
		s.fields = append(s.fields, f)
	}
	return nil
}

// parseRows reads row_selector: every visible element it matches is one
// record, its fields read inside it by selector. A region is a fixed place
// on the screen, not a place inside a row, and an X display has no rows.
func (s *settings) parseRows(rowSelector string) error {
	if rowSelector == "" {
		return nil
	}
	p := Kind + ".row_selector"
	if err := checkSelector(rowSelector, p); err != nil {
		return err
	}
	if s.display != "" {
		return configError(p, "an X display has no page structure to find rows in; remove row_selector (read it from the Chromium the automation drives, with cdp_url)")
	}
	for i, f := range s.fields {
		if f.region != nil {
			return configError(fmt.Sprintf("%s.fields[%d].region", Kind, i), "with row_selector every field is read inside each row: give it a selector (relative to the row, such as td.amount) instead of a region of the screen")
		}
	}
	s.rows = rowSelector
	return nil
}

// parseReady reads ready_selector: an element the page shows once it has
// rendered what is read. An X display has no page structure to wait on.
func (s *settings) parseReady(ready string) error {
	if ready == "" {
		return nil
	}
	p := Kind + ".ready_selector"
	if err := checkSelector(ready, p); err != nil {
		return err
	}
	if s.display != "" {
		return configError(p, "an X display has no page structure to wait for; remove ready_selector (read it from the Chromium the automation drives, with cdp_url)")
	}
	s.ready = ready
	return nil
}

// parseReadPosts reads read_post_paths: the paths, on the site the
// re-navigation opens first, that the re-opened page may POST to as it
// loads (a session token's refresh). Every other request that is not a
// read is still refused by both guards.
func (s *settings) parseReadPosts(paths []string) error {
	p := Kind + ".read_post_paths"
	if len(paths) == 0 {
		return nil
	}
	if s.tier != sdk.TierReacquiredState {
		return configError(p, "only a read-back that re-opens the record runs under the read-only guards; a read of the screen the save left sends nothing, so remove read_post_paths")
	}
	u, err := url.Parse(s.actions[0].url)
	if err != nil {
		return configError(Kind+".renavigate[0].open", "write an absolute http(s) URL")
	}
	origin := u.Scheme + "://" + u.Host
	for i, path := range paths {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "#{}") {
			return configError(fmt.Sprintf("%s[%d]", p, i), "%q: write a path on the site of renavigate[0].open (%s) that starts with / and has no fragment or {placeholder}, such as /auth/refresh (with the exact query string the page sends, if any: /auth/refresh?grant=session)", path, origin)
		}
		s.readPosts = append(s.readPosts, cdpguard.OriginPath(origin+path))
		s.readPostsExact = append(s.readPostsExact, postTarget(origin+path))
	}
	return nil
}

// postTarget is what a POST's URL must equal to pass as a read_post_paths
// target: origin, path and query exactly (no query is the empty one), so
// that a declared path cannot carry data in a query it was not declared
// with.
func postTarget(rawURL string) string {
	t := cdpguard.OriginPath(rawURL)
	if u, err := url.Parse(rawURL); err == nil && t != "" && u.RawQuery != "" {
		t += "?" + u.RawQuery
	}
	return t
}

// standIns maps every run parameter an action uses to a stand-in value, to
// check the action's shape before any run's values are known.
func standIns(as actionSection) map[string]string {
	out := map[string]string{}
	for _, name := range param.Names(as.Open) {
		out[name] = "x"
	}
	if as.Type != nil && as.Type.Param != "" {
		out[as.Type.Param] = "x"
	}
	return out
}

// bind returns a copy of s for one call: the re-navigation and the fields'
// expected values bound to params. A parameter the run does not supply, or
// a value that cannot stand where it goes, is a *refusal.Error.
func (s *settings) bind(params map[string]string) (*settings, error) {
	b := *s
	b.actions = make([]action, 0, len(s.renavigate))
	for i, as := range s.renavigate {
		a, err := bindAction(as, fmt.Sprintf("%s.renavigate[%d]", Kind, i), params)
		if err != nil {
			return nil, err
		}
		b.actions = append(b.actions, a)
	}
	b.fields = make([]field, len(s.fields))
	for i, f := range s.fields {
		v, ok := params[f.param]
		if !ok {
			return nil, configError(f.path, "the run has no parameter %q; pass it with the run or mark another field", f.param)
		}
		f.expected = v
		b.fields[i] = f
	}
	return &b, nil
}

// bindAction checks one re-navigation action and binds its run parameters.
func bindAction(as actionSection, p string, params map[string]string) (action, error) {
	n := 0
	for _, set := range []bool{as.Open != "", as.Click != "", as.Type != nil, as.Wait != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return action{}, configError(p, "each action is exactly one of open: URL, click: CSS, type: {selector, param} or wait: {selector | text}")
	}
	switch {
	case as.Open != "":
		u, err := expandURL(as.Open, params, p+".open")
		return action{kind: "open", url: u}, err
	case as.Click != "":
		return action{kind: "click", selector: as.Click}, checkSelector(as.Click, p+".click")
	case as.Type != nil:
		if err := checkSelector(as.Type.Selector, p+".type.selector"); err != nil {
			return action{}, err
		}
		v, ok := params[as.Type.Param]
		if as.Type.Param == "" || !ok {
			return action{}, configError(p+".type.param", "name a run parameter to type (the run has no %q)", as.Type.Param)
		}
		if err := param.Check(v); err != nil {
			return action{}, configError(p+".type.param", "the run parameter %q cannot be typed: %v", as.Type.Param, err)
		}
		return action{kind: "type", selector: as.Type.Selector, text: v}, nil
	default:
		w := as.Wait
		switch {
		case (w.Selector == "") == (w.Text == ""):
			return action{}, configError(p+".wait", "give selector or text, one of them")
		case w.Selector != "":
			return action{kind: "wait", selector: w.Selector}, checkSelector(w.Selector, p+".wait.selector")
		}
		return action{kind: "wait", text: w.Text}, nil
	}
}

func checkSelector(sel, p string) error {
	if strings.TrimSpace(sel) == "" {
		return configError(p, "missing: a CSS selector")
	}
	return nil
}

// expandURL fills {name} placeholders with run parameters through
// sdk/param, the one implementation every read uses: one whole path segment
// before the query (never empty, "." or "..", never holding / or \),
// query-escaped after it, no control characters, and never in the scheme
// or host, so a run parameter cannot send the read-back to another site.
func expandURL(tmpl string, params map[string]string, p string) (string, error) {
	filled := tmpl
	for _, ph := range param.Placeholders(tmpl) {
		filled = strings.Replace(filled, tmpl[ph.Start:ph.End], "x", 1)
	}
	if u, err := url.Parse(filled); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", configError(p, "write an absolute http(s) URL, such as https://app.example.org/records/{record_ref}")
	}
	for _, name := range param.Names(tmpl) {
		if _, ok := params[name]; !ok {
			return "", configError(p, "the run has no parameter %q for {%s}", name, name)
		}
	}
	out, err := param.Expand(tmpl, param.URL, param.Lookup(func(name string) (string, bool) {
		v, ok := params[name]
		return v, ok
	}))
	if err != nil {
		return "", configError(p, "%v", err)
	}
	return out, nil
}

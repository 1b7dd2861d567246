package uireadback

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// testSection is a section for configuration tests; no server is involved.
func testSection() map[string]any {
	a := &app{URL: "https://records.example.org"}
	return a.section()
}

func configure(t *testing.T, sec map[string]any, params, secrets map[string]string) (*settings, error) {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	if params == nil {
		params = map[string]string{"patient_id": "p1"}
	}
	if secrets == nil {
		secrets = map[string]string{usernameSlot: "reader", passwordSlot: "s3cret"}
	}
	s, err := parseSettings(sdk.ConfigureRequest{Kind: Kind, Config: raw, Secrets: secrets})
	if err != nil {
		return nil, err
	}
	return s.bind(params)
}

func TestConfigureAccepts(t *testing.T) {
	s, err := configure(t, testSection(), map[string]string{"patient_id": "a b;ç?&"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://records.example.org/patients/a%20b%3B%C3%A7%3F&/encounters"; s.recordURL != want {
		t.Errorf("record URL %q; want %q", s.recordURL, want)
	}
	if s.identity.value != "a b;ç?&" || s.identity.field != "patient_id" {
		t.Errorf("identity %+v", s.identity)
	}
	if s.signIn.username != "reader" || s.signIn.password != "s3cret" {
		t.Error("the secrets were not taken from their slots")
	}
	var names []string
	for _, f := range s.fields {
		names = append(names, f.name)
	}
	if diff := cmp.Diff([]string{"date", "id", "note", "type"}, names); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if s.navTimeout != 5*time.Second || len(s.truncation) != 2 {
		t.Errorf("navigation timeout %v, markers %q", s.navTimeout, s.truncation)
	}
}

func TestConfigureQueryParameter(t *testing.T) {
	sec := testSection()
	inner(sec)["record_url"] = "https://records.example.org/encounters?patient={patient}&view={view}"
	inner(sec)["url_params"] = map[string]any{"patient": map[string]any{"param": "patient_id"}, "view": map[string]any{"literal": "all rows"}}
	s, err := configure(t, sec, map[string]string{"patient_id": "a b&c=d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://records.example.org/encounters?patient=a+b%26c%3Dd&view=all+rows"; s.recordURL != want {
		t.Errorf("record URL %q; want %q", s.recordURL, want)
	}
}

// TestConfigureRefuses: each refusal names the path and says what to write.
func TestConfigureRefuses(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(sec, ui map[string]any)
		params  map[string]string
		secrets map[string]string
		path    string
		message string
	}{
		{"unknown key", func(_, ui map[string]any) { ui["row_selectr"] = "x" }, nil, nil, "ui_readback.row_selectr", "unknown key"},
		{"unknown sign_in key", func(_, ui map[string]any) { ui["sign_in"].(map[string]any)["password"] = "x" }, nil, nil, "ui_readback.sign_in.password", "unknown key"},
		{"unknown field key", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["note"].(map[string]any)["format"] = "x"
		}, nil, nil, "ui_readback.fields.note.format", "unknown key"},
		{"no section", func(sec, _ map[string]any) { delete(sec, "ui_readback") }, nil, nil, "ui_readback", "missing"},
		{"other kind", func(sec, _ map[string]any) { sec["kind"] = "sql" }, nil, nil, "kind", "ui_readback"},
		{"missing param", nil, map[string]string{}, nil, "ui_readback.url_params.patient", `no parameter "patient_id"`},
		{"path separator in a param", nil, map[string]string{"patient_id": "../admin"}, nil, "ui_readback.record_url", "placeholder {patient} in the path holds a path separator"},
		{"slash in a param", nil, map[string]string{"patient_id": "p1/../../x"}, nil, "ui_readback.record_url", "path separator"},
		{"dot-dot param", nil, map[string]string{"patient_id": ".."}, nil, "ui_readback.record_url", "names another resource"},
		{"control character in a param", nil, map[string]string{"patient_id": "p1\r\nX: y"}, nil, "ui_readback.record_url", "control character"},
		{"placeholder without url_params", func(_, ui map[string]any) { delete(ui, "url_params") }, nil, nil, "ui_readback.record_url", "{patient}"},
		{"unused url_params", func(_, ui map[string]any) {
			ui["url_params"].(map[string]any)["extra"] = "x"
		}, nil, nil, "ui_readback.url_params.extra", "no {extra} placeholder"},
		{"placeholder in the host", func(_, ui map[string]any) {
			ui["record_url"] = "https://{patient}.example.org/encounters"
		}, nil, nil, "ui_readback.record_url", "scheme or host"},
		{"relative record_url", func(_, ui map[string]any) { ui["record_url"] = "/patients/{patient}" }, nil, nil, "ui_readback.record_url", "absolute"},
		{"numeric literal", func(_, ui map[string]any) {
			ui["url_params"].(map[string]any)["patient"] = 42
		}, nil, nil, "ui_readback.url_params.patient", `as strings ("42")`},
		{"no secret delivered", nil, nil, map[string]string{usernameSlot: "reader"}, "ui_readback.sign_in.password_env", "secrets.allow"},
		{"no sign_in", func(_, ui map[string]any) { delete(ui, "sign_in") }, nil, nil, "ui_readback.sign_in", "missing"},
		{"empty selector", func(_, ui map[string]any) { ui["ready_selector"] = " " }, nil, nil, "ui_readback.ready_selector", "empty"},
		{"no fields", func(_, ui map[string]any) { ui["fields"] = map[string]any{} }, nil, nil, "ui_readback.fields", "at least one"},
		{"field reads nothing", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["note"] = map[string]any{"casefold": true}
		}, nil, nil, "ui_readback.fields.note", "selector"},
		{"field shadows identity", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["patient_id"] = map[string]any{"selector": "td"}
		}, nil, nil, "ui_readback.fields.patient_id", "identity.field"},
		{"bad date_format", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["date"].(map[string]any)["date_format"] = "%d/%m/%Q"
		}, nil, nil, "ui_readback.fields.date.date_format", "%Q is not supported"},
		{"date_format without a day", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["date"].(map[string]any)["date_format"] = "%m/%Y"
		}, nil, nil, "ui_readback.fields.date.date_format", "a year, a month and a day"},
		{"casefold not a bool", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["type"].(map[string]any)["casefold"] = "yes"
		}, nil, nil, "ui_readback.fields.type.casefold", "true or false"},
		{"no identity reader", func(_, ui map[string]any) { delete(ui["identity"].(map[string]any), "reader") }, nil, nil, "ui_readback.identity.reader", "selector"},
		{"empty identity", func(_, ui map[string]any) { ui["identity"].(map[string]any)["value"] = "" }, nil, nil, "ui_readback.identity.value", "empty"},
		{"read_post_paths not a path", func(_, ui map[string]any) { ui["read_post_paths"] = []any{"graphql"} }, nil, nil, "ui_readback.read_post_paths[0]", "starts with /"},
		{"empty truncation marker", func(_, ui map[string]any) { ui["truncation_markers"] = []any{"…", ""} }, nil, nil, "ui_readback.truncation_markers[1]", "empty"},
		{"zero timeout", func(_, ui map[string]any) { ui["navigation_timeout_s"] = 0 }, nil, nil, "ui_readback.navigation_timeout_s", "above 0"},
		{"empty field truncation marker", func(_, ui map[string]any) {
			ui["fields"].(map[string]any)["note"].(map[string]any)["truncation_markers"] = []any{""}
		}, nil, nil, "ui_readback.fields.note.truncation_markers[0]", "empty"},
		{"zero sign-in attempts", func(_, ui map[string]any) { ui["sign_in"].(map[string]any)["max_attempts"] = 0 }, nil, nil, "ui_readback.sign_in.max_attempts", "from 1 to 5"},
		{"too many sign-in attempts", func(_, ui map[string]any) { ui["sign_in"].(map[string]any)["max_attempts"] = 6 }, nil, nil, "ui_readback.sign_in.max_attempts", "from 1 to 5"},
		{"fractional sign-in attempts", func(_, ui map[string]any) { ui["sign_in"].(map[string]any)["max_attempts"] = 1.5 }, nil, nil, "ui_readback.sign_in.max_attempts", ""},
		{"sign-in URL not http", func(_, ui map[string]any) {
			ui["sign_in"].(map[string]any)["url"] = "file:///etc/passwd"
		}, nil, nil, "ui_readback.sign_in.url", "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := testSection()
			if tt.edit != nil {
				tt.edit(sec, inner(sec))
			}
			_, err := configure(t, sec, tt.params, tt.secrets)
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.path || !strings.Contains(ce.Message, tt.message) {
				t.Errorf("refusal %q: %q; want path %q and a message with %q", ce.Path, ce.Message, tt.path, tt.message)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Error("the refusal quotes the password")
			}
		})
	}
}

func TestDateLayout(t *testing.T) {
	tests := []struct {
		format, shown, want string
	}{
		{"%d/%m/%Y", "31/12/2026", "2026-12-31"},
		{"02/01/2006", "31/12/2026", "2026-12-31"},
		{"%-d %B %Y", "5 March 2026", "2026-03-05"},
		{"%e %b %y", " 5 Mar 26", "2026-03-05"},
		{"%Y-%m-%d %H:%M", "2026-03-05 14:07", "2026-03-05T14:07:00"},
		{"%d.%m.%Y %I:%M %p", "05.03.2026 02:07 PM", "2026-03-05T14:07:00"},
		{"%Y-%m-%dT%H:%M:%S%z", "2026-03-05T14:07:09+0100", "2026-03-05T14:07:09+01:00"},
		{"%F %T", "2026-03-05 14:07:09", "2026-03-05T14:07:09"},
		{"%% on %d/%m/%Y", "% on 05/03/2026", "2026-03-05"},
		{"%d de %B de %Y", "05 de March de 2026", "2026-03-05"},
	}
	for _, tt := range tests {
		layout, iso, err := dateLayout(tt.format)
		if err != nil {
			t.Errorf("%q: %v", tt.format, err)
			continue
		}
		f := field{name: "d", selector: "td", layout: layout, isoLayout: iso}
		got, err := f.read(&fieldReading{Text: tt.shown})
		if err != nil || got != tt.want {
			t.Errorf("%q reading %q = %q, %v; want %q", tt.format, tt.shown, got, err, tt.want)
		}
	}
	for _, bad := range []string{"%", "%Q", "%H:%M", "%Y %m %d %H", "plain", "100%% %d/%m/%Y", "%d Mon %m %Y"} {
		if _, _, err := dateLayout(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFieldRead(t *testing.T) {
	title := func(s string) *string { return &s }
	tests := []struct {
		name    string
		f       field
		r       *fieldReading
		want    string
		wantErr string
	}{
		{"collapsed text", field{selector: "td"}, &fieldReading{Text: " a \n\u00a0 b\t"}, "a b", ""},
		{"attribute", field{attribute: "data-id"}, &fieldReading{Attr: title(" 42 ")}, "42", ""},
		{"casefold", field{selector: "td", casefold: true}, &fieldReading{Text: "TRIAGE Ünit"}, "triage ünit", ""},
		{"title equal to text", field{selector: "td"}, &fieldReading{Text: "Follow-up", Title: title("Follow-up")}, "Follow-up", ""},
		{"title other than text", field{selector: "td"}, &fieldReading{Text: "Follow-up", Title: title("Note")}, "Follow-up", ""},
		{"missing element", field{selector: "td.x"}, nil, "", "td.x matches nothing"},
		{"missing attribute", field{attribute: "data-id"}, &fieldReading{}, "", "no data-id attribute"},
		{"ellipsis", field{selector: "td"}, &fieldReading{Text: "Patient re…"}, "", "truncation marker"},
		{"three dots", field{selector: "td"}, &fieldReading{Text: "Patient re..."}, "", "truncation marker"},
		{"title goes on", field{selector: "td"}, &fieldReading{Text: "Patient re", Title: title("Patient reports pain")}, "", "shortened value"},
		{"text hidden, title kept", field{selector: "td"}, &fieldReading{Text: "", Title: title("Patient reports pain")}, "", "shortened value"},
		{"marker in an attribute", field{attribute: "title"}, &fieldReading{Attr: title("wait...")}, "", "truncation marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.markers = DefaultTruncationMarkers
			got, err := tt.f.read(tt.r)
			switch {
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Errorf("read = %q, %v; want %q", got, err, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("read = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
	if got, err := (field{selector: "td", markers: []string{}}).read(&fieldReading{Text: "wait..."}); err != nil || got != "wait..." {
		t.Errorf("with no markers: %q, %v", got, err)
	}
}

func TestPolicy(t *testing.T) {
	s, err := configure(t, testSection(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.readPostPaths = []string{"https://records.example.org/graphql"}
	p := newPolicy(s)
	tests := []struct {
		method, url  string
		signIn, read bool
	}{
		{"GET", "https://records.example.org/patients/p1/encounters", true, true},
		{"head", "https://elsewhere.example/x", true, true},
		{"OPTIONS", "https://records.example.org/api", true, true},
		{"POST", "https://records.example.org/login", true, false},
		{"POST", "https://records.example.org/login?next=/", true, false},
		{"POST", "https://RECORDS.example.org/login", true, false},
		{"POST", "https://records.example.org/login/", false, false},
		{"POST", "http://records.example.org/login", false, false},
		{"PUT", "https://records.example.org/login", false, false},
		{"POST", "https://records.example.org/graphql", true, true},
		{"POST", "https://records.example.org/api/viewed", false, false},
		{"DELETE", "https://records.example.org/graphql", false, false},
		{"PATCH", "https://records.example.org/patients/p1", false, false},
		{"POST", "not a url", false, false},
	}
	for _, phase := range []int32{phaseSignIn, phaseRead} {
		p.phase.Store(phase)
		for _, tt := range tests {
			want := tt.signIn
			if phase == phaseRead {
				want = tt.read
			}
			if got := p.allows(tt.method, tt.url); got != want {
				t.Errorf("phase %d: %s %s allowed = %v; want %v", phase, tt.method, tt.url, got, want)
			}
		}
	}
	p.phase.Store(phaseRead)
	if diff := cmp.Diff([]string{"https://records.example.org/graphql"}, p.allowedPosts()); diff != "" {
		t.Errorf("allowed posts in the read phase (-want +got):\n%s", diff)
	}
}

// FuzzConfigure: no section, however malformed, panics the parser, and
// every refusal is a *refusal.Error that never quotes the password.
func FuzzConfigure(f *testing.F) {
	seed, _ := json.Marshal(testSection())
	f.Add(seed)
	f.Add([]byte(`{"ui_readback": {"record_url": "http://x/{a}{b}", "url_params": {"a": {"param": ""}}}}`))
	f.Add([]byte(`{"ui_readback": []}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := parseSettings(sdk.ConfigureRequest{
			Kind: Kind, Config: raw,
			Secrets: map[string]string{usernameSlot: "reader", passwordSlot: "pw-\x00-secret"},
		})
		if err == nil {
			_, err = s.bind(map[string]string{"patient_id": "p1"})
		}
		if err == nil {
			return
		}
		if _, ok := errors.AsType[*refusal.Error](err); !ok {
			t.Fatalf("a refusal that is not a *refusal.Error: %v", err)
		}
		if strings.Contains(err.Error(), "pw-\x00-secret") {
			t.Fatal("a refusal quotes the password")
		}
	})
}

// FuzzDateFormat: any date_format is either refused or reads back the
// date it writes.
func FuzzDateFormat(f *testing.F) {
	for _, s := range []string{"%d/%m/%Y", "02/01/2006", "%Y-%m-%dT%H:%M:%S%z", "%-d %B %Y", "%%", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, format string) {
		layout, iso, err := dateLayout(format)
		if err != nil {
			return
		}
		when := time.Date(2027, time.February, 9, 8, 6, 0, 0, time.UTC)
		got, err := (field{selector: "td", layout: layout, isoLayout: iso}).read(&fieldReading{Text: when.Format(layout)})
		if err != nil {
			return // a layout whose own output does not survive whitespace collapsing
		}
		if !strings.HasPrefix(got, "2027-02-09") {
			t.Fatalf("%q wrote %q and read back %q", format, when.Format(layout), got)
		}
	})
}

// parseSettings decodes the deployment section with the SDK's strict
// decoder, as Define does, and resolves it.
func parseSettings(req sdk.ConfigureRequest) (*settings, error) {
	var cfg config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	return resolve(cfg, req)
}

// TestConfigureDefaults: the sign-in gate and the truncation markers a
// section gets when it sets neither, and a field's own markers.
func TestConfigureDefaults(t *testing.T) {
	s, err := configure(t, testSection(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.signIn.maxAttempts != 1 || s.gate.maxAttempts != 1 || s.gate.hold != defaultSignInHold {
		t.Errorf("sign-in attempts %d, gate %d for %v; want 1 for %v", s.signIn.maxAttempts, s.gate.maxAttempts, s.gate.hold, defaultSignInHold)
	}
	for _, f := range s.fields {
		if !slices.Equal(f.markers, DefaultTruncationMarkers) {
			t.Errorf("field %s markers %q; want the default", f.name, f.markers)
		}
	}
	sec := testSection()
	inner(sec)["sign_in"].(map[string]any)["max_attempts"] = 3
	inner(sec)["truncation_markers"] = []any{"[…]"}
	inner(sec)["fields"].(map[string]any)["note"].(map[string]any)["truncation_markers"] = []any{}
	raw, _ := json.Marshal(sec)
	s, err = parseSettings(sdk.ConfigureRequest{Kind: Kind, Config: raw, EffectTimeout: 7 * time.Second,
		Secrets: map[string]string{usernameSlot: "reader", passwordSlot: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.gate.maxAttempts != 3 || s.gate.hold != 7*time.Second {
		t.Errorf("gate %d for %v; want 3 for the effect timeout, 7s", s.gate.maxAttempts, s.gate.hold)
	}
	for _, f := range s.fields {
		want := []string{"[…]"}
		if f.name == "note" {
			want = []string{}
		}
		if !slices.Equal(f.markers, want) {
			t.Errorf("field %s markers %q; want %q", f.name, f.markers, want)
		}
	}
}

// TestSignInGate: rejections in a row hold the gate for its window; a
// success resets the count; the window ends.
func TestSignInGate(t *testing.T) {
	now := time.Date(2026, 5, 6, 10, 0, 0, 0, time.UTC)
	g := newSignInGate(2, time.Minute)
	g.now = func() time.Time { return now }
	if g.admit() != "" || g.reject() {
		t.Fatal("the first rejection of two held the gate")
	}
	g.succeeded()
	if g.reject() || g.admit() != "" {
		t.Fatal("a success did not reset the count")
	}
	if !g.reject() {
		t.Fatal("the second rejection in a row did not hold the gate")
	}
	why := g.admit()
	if !strings.Contains(why, "rejected the read-back account's credential at 10:00:00") || !strings.Contains(why, "before 10:01:00") || !strings.Contains(why, "restore the account's access") {
		t.Errorf("held: %q", why)
	}
	now = now.Add(59 * time.Second)
	if g.admit() == "" {
		t.Error("the gate opened inside its window")
	}
	now = now.Add(time.Second)
	if why := g.admit(); why != "" {
		t.Errorf("the gate still holds after its window: %q", why)
	}
}

// TestSpellings: a value read is reported in the one spelling of the run
// that normalises to it; the contract's own selector value comes first;
// two spellings that disagree leave the value as read.
func TestSpellings(t *testing.T) {
	layout, iso, err := dateLayout("%d/%m/%Y")
	if err != nil {
		t.Fatal(err)
	}
	note := field{name: "note", selector: "td"}
	typ := field{name: "type", selector: "td", casefold: true}
	date := field{name: "date", selector: "td", layout: layout, isoLayout: iso}
	sp := spellings{params: map[string]string{"note": "Follow-up  in 2 weeks", "t": "Triage", "d": "06/05/2026", "other": "a  b", "other2": "a b "}}
	tests := []struct {
		f          field
		sel        map[string]string
		read, want string
	}{
		{note, nil, "Follow-up in 2 weeks", "Follow-up  in 2 weeks"},
		{note, nil, "Follow-up in 3 weeks", "Follow-up in 3 weeks"},
		{note, nil, "follow-up in 2 weeks", "follow-up in 2 weeks"},
		{typ, nil, "triage", "Triage"},
		{typ, map[string]string{"type": "TRIAGE"}, "triage", "TRIAGE"},
		{typ, map[string]string{"type": "Vitals"}, "triage", "Triage"},
		{date, nil, "2026-05-06", "06/05/2026"},
		{date, nil, "2026-05-07", "2026-05-07"},
		{note, nil, "a b", "a b"}, // two spellings disagree
	}
	for _, tt := range tests {
		sp.selector = tt.sel
		if got := sp.of(tt.f.name, tt.read, tt.f.expected, sp.candidates(tt.f.expected)); got != tt.want {
			t.Errorf("%s read %q (selector %v) = %q; want %q", tt.f.name, tt.read, tt.sel, got, tt.want)
		}
	}
}

// TestExpectedISOStaysISO: a contract's value already in ISO 8601 is taken
// as ISO even when the field's date_format would also read it: under
// %Y-%d-%m the text 2031-04-03 is 4 March, but a contract that writes it
// means 3 April, so a page showing 4 March (2031-04-03 in that format,
// read as 2031-03-04) must not be reported in the contract's spelling.
func TestExpectedISOStaysISO(t *testing.T) {
	for _, format := range []string{"%Y-%d-%m", "2006-02-01"} {
		layout, iso, err := dateLayout(format)
		if err != nil {
			t.Fatal(err)
		}
		date := field{name: "date", selector: "td", layout: layout, isoLayout: iso}
		if got := date.expected("2031-04-03"); got != "2031-04-03" {
			t.Errorf("%s: the ISO value 2031-04-03 normalises to %q; want it kept", format, got)
		}
		read, err := date.read(&fieldReading{Text: "2031-04-03"}) // 4 March, as the page shows it
		if err != nil || read != "2031-03-04" {
			t.Fatalf("%s: read %q, %v; want 2031-03-04", format, read, err)
		}
		sp := spellings{daemon: true, expected: map[string][]string{"date": {"2031-04-03"}}}
		if got := sp.of("date", read, date.expected, nil); got != "2031-03-04" {
			t.Errorf("%s: 4 March reported as %q to a contract expecting 3 April; want 2031-03-04", format, got)
		}
	}
}

// TestAttributeWhitespaceIsData: an attribute is not rendered, so a run of
// spaces in it is the value's own, not the page's layout: a field read
// from an attribute keeps it (trimmed only), and a contract's value with
// two spaces is not reported as an attribute that holds one.
func TestAttributeWhitespaceIsData(t *testing.T) {
	code := field{name: "code", attribute: "data-code"}
	one := "AB 12"
	read, err := code.read(&fieldReading{Attr: &one})
	if err != nil || read != "AB 12" {
		t.Fatalf("read %q, %v", read, err)
	}
	sp := spellings{daemon: true, expected: map[string][]string{"code": {"AB  12"}}}
	if got := sp.of("code", read, code.expected, nil); got != "AB 12" {
		t.Errorf("an attribute holding %q reported as %q to a contract expecting %q; want it as it is", one, got, "AB  12")
	}
	two := " AB  12\n"
	if read, err := code.read(&fieldReading{Attr: &two}); err != nil || read != "AB  12" {
		t.Errorf("read %q, %v; want the attribute trimmed, its inner spaces kept", read, err)
	}
}

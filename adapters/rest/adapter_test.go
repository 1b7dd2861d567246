package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-rest, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/rest", "rest", &pluginBinary)
}

const doctype = "Patient Encounter"

// listPath is a Frappe list of one patient's encounters, all of them on one
// page (limit_page_length=0), so the section declares single_response.
const listPath = `/api/resource/Patient%20Encounter?fields=["name","patient","encounter_type","notes","modified"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation%20asc&limit_page_length=0`

func frappeSection(f *httprecords.Frappe, edit func(map[string]any)) map[string]any {
	sec := map[string]any{
		"kind":         "rest",
		"base_url":     f.URL,
		"records_path": listPath,
		"path_params":  map[string]any{"patient": map[string]any{"param": "patient_id"}},
		"records_key":  "data",
		"auth":         map[string]any{"header": "Authorization", "value_env": "ERP_READ_TOKEN"},
		"ca_file":      f.CAFile,
		// limit_page_length=0 asks for every record in one response.
		"single_response": true,
	}
	if edit != nil {
		edit(sec)
	}
	if _, paged := sec["pagination"]; paged {
		// A paged section declares its completeness by pagination.
		delete(sec, "single_response")
	}
	return sec
}

func request(t testing.TB, sec map[string]any, params, secrets map[string]string) httprecords.Setup {
	t.Helper()
	return httprecords.Request(t, Kind, sec, params, secrets)
}

func inProcess(t testing.TB) *httprecords.Process {
	t.Helper()
	return httprecords.InProcess(t, New)
}

func configured(t testing.TB, req httprecords.Setup) *httprecords.Process {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), req); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// read captures once (after or before) and collects the whole read.
func read(t testing.TB, c *httprecords.Process, after bool, timeout time.Duration) (httprecords.Read, error) {
	t.Helper()
	return httprecords.Capture(t, c, after, timeout, "name")
}

func mustRead(t testing.TB, c *httprecords.Process, after bool) httprecords.Read {
	t.Helper()
	r, err := read(t, c, after, 10*time.Second)
	if err != nil {
		t.Fatalf("reading records: %v", err)
	}
	return r
}

func encounter(patient, typ, notes string) map[string]any {
	return map[string]any{"patient": patient, "encounter_type": typ, "notes": notes}
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	secrets := map[string]string{"auth.value_env": f.Token()}
	params := map[string]string{"patient_id": "PAT-1"}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		edit     func(map[string]any)
		params   map[string]string
		secrets  map[string]string
		wantPath string
		wantMsg  string
	}{
		{"wrong kind", func(s map[string]any) { s["kind"] = "graphql" }, nil, nil, "kind", `reads kind "rest"`},
		{"unknown key", func(s map[string]any) { s["recordskey"] = "data" }, nil, nil, "recordskey", "unknown key for kind rest"},
		{"no base_url", func(s map[string]any) { delete(s, "base_url") }, nil, nil, "base_url", "missing"},
		{"ftp base_url", func(s map[string]any) { s["base_url"] = "ftp://127.0.0.1" }, nil, nil, "base_url", "https://"},
		{"base_url with a query", func(s map[string]any) { s["base_url"] = f.URL + "?x=1" }, nil, nil, "base_url", "query"},
		{"base_url with credentials", func(s map[string]any) { s["base_url"] = "https://u:p@127.0.0.1" }, nil, nil, "base_url", "must not carry credentials"},
		{"no records_path", func(s map[string]any) { delete(s, "records_path") }, nil, nil, "records_path", "missing"},
		{"relative records_path", func(s map[string]any) { s["records_path"] = "api/x" }, nil, nil, "records_path", "must start with /"},
		{"control character in records_path", func(s map[string]any) { s["records_path"] = "/api/resource/Patient\tEncounter" }, nil, nil, "records_path", "control character"},
		{"missing run parameter", nil, map[string]string{"other": "x"}, nil, "path_params.patient", `the run has no parameter "patient_id"`},
		{"placeholder without entry", func(s map[string]any) { delete(s, "path_params") }, nil, nil, "records_path", "placeholder {patient} has no entry in path_params"},
		{"entry without placeholder", func(s map[string]any) {
			s["path_params"] = map[string]any{"patient": "PAT-1", "extra": "x"}
		}, nil, nil, "path_params.extra", "never uses it"},
		{"dot-dot in the path", func(s map[string]any) {
			s["records_path"] = "/api/resource/Patient%20Encounter/{name}"
			s["path_params"] = map[string]any{"name": ".."}
		}, nil, nil, "records_path", "names another resource"},
		{"number as a value", func(s map[string]any) { s["path_params"] = map[string]any{"patient": 5} }, nil, nil, "path_params.patient", "numbers are written as strings"},
		{"bad records_key", func(s map[string]any) { s["records_key"] = "data..x" }, nil, nil, "records_key", "empty"},
		{"two auth styles", func(s map[string]any) {
			s["auth"] = map[string]any{"bearer_env": "A", "basic_env": "B"}
		}, nil, nil, "auth", "exactly one"},
		{"secret not delivered", nil, nil, map[string]string{}, "auth.value_env", "ERP_READ_TOKEN"},
		{"header without value_env", func(s map[string]any) { s["auth"] = map[string]any{"header": "X-Api-Key"} }, nil, nil, "auth.value_env", "missing"},
		{"bad header name", func(s map[string]any) {
			s["auth"] = map[string]any{"header": "X Api", "value_env": "ERP_READ_TOKEN"}
		}, nil, nil, "auth.header", "not a usable header name"},
		{"basic without a colon", func(s map[string]any) { s["auth"] = map[string]any{"basic_env": "ERP_BASIC"} },
			nil, map[string]string{"auth.basic_env": "nocolon"}, "auth.basic_env", "user:password"},
		{"unknown auth key", func(s map[string]any) { s["auth"] = map[string]any{"token_env": "X"} }, nil, nil, "auth.token_env", "unknown key"},
		{"two paging styles", func(s map[string]any) {
			s["pagination"] = map[string]any{"next_key": "links.next", "offset_param": "limit_start"}
		}, nil, nil, "pagination.next_key", "choose one paging style"},
		{"offset without page_size", func(s map[string]any) {
			s["pagination"] = map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length"}
		}, nil, nil, "pagination.page_size", "missing"},
		{"max_pages zero", func(s map[string]any) {
			s["pagination"] = map[string]any{"next_key": "next", "max_pages": 0}
		}, nil, nil, "pagination.max_pages", "whole number"},
		{"ca_file missing", func(s map[string]any) { s["ca_file"] = "/nonexistent/ca.pem" }, nil, nil, "ca_file", "cannot read"},
		{"ca_file not PEM", func(s map[string]any) { s["ca_file"] = notPEM }, nil, nil, "ca_file", "no PEM certificate"},
		{"verify_tls not a bool", func(s map[string]any) { s["verify_tls"] = "no" }, nil, nil, "verify_tls", "true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, s := params, secrets
			if tt.params != nil {
				p = tt.params
			}
			if tt.secrets != nil {
				s = tt.secrets
			}
			err := inProcess(t).Configure(t.Context(), request(t, frappeSection(f, tt.edit), p, s))
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q\nwant path %q and a message containing %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "rest" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("GetInfo = %+v", info)
	}
}

// TestRecordsFromFrappe reads a Frappe list over TLS (the test CA in
// ca_file) with each of the three credential styles, and checks the records
// are the list's elements, values untouched.
func TestRecordsFromFrappe(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	first := f.Post(t, doctype, map[string]any{"patient": "PAT 1/a", "encounter_type": "Triage", "notes": "naïve  spacing", "weight": json.Number("72.50")})
	f.Post(t, doctype, encounter("PAT-2", "Triage", "other patient"))
	second := f.Post(t, doctype, encounter("PAT 1/a", "Vitals", ""))
	path := `/api/resource/Patient%20Encounter?fields=["name","patient","encounter_type","notes","weight"]&filters=[["patient","=","{patient}"]]&order_by=creation%20asc&limit_page_length=0`
	want := []sdk.Record{
		{"name": first, "patient": "PAT 1/a", "encounter_type": "Triage", "notes": "naïve  spacing", "weight": json.Number("72.50")},
		{"name": second, "patient": "PAT 1/a", "encounter_type": "Vitals", "notes": "", "weight": nil},
	}
	tests := []struct {
		name    string
		auth    map[string]any
		secrets map[string]string
	}{
		{"token header", map[string]any{"header": "Authorization", "value_env": "ERP_READ_TOKEN"}, map[string]string{"auth.value_env": f.Token()}},
		{"basic", map[string]any{"basic_env": "ERP_BASIC"}, map[string]string{"auth.basic_env": f.APIKey + ":" + f.APISecret}},
		{"bearer", map[string]any{"bearer_env": "ERP_BEARER"}, map[string]string{"auth.bearer_env": f.Bearer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sec := frappeSection(f, func(s map[string]any) { s["auth"] = tt.auth; s["records_path"] = path })
			ip := configured(t, request(t, sec, map[string]string{"patient_id": "PAT 1/a"}, tt.secrets))
			got := mustRead(t, ip, true)
			if !got.Reachable {
				t.Fatalf("unreachable: %s", got.Reason)
			}
			if diff := cmp.Diff(want, got.Records); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVerdicts: begin (before read) -> the automation writes through the
// API -> after read -> the daemon's judge.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	const written = `{kind: record_written, match: {patient: {param: patient_id}, encounter_type: Triage}, count_new_only: true}`
	const notes = `{kind: field_equals, match: {patient: {param: patient_id}, encounter_type: Triage}, field: notes, value: Follow-up}`
	tests := []struct {
		name    string
		effect  string
		act     func(t *testing.T, f *httprecords.Frappe)
		timeout time.Duration
		want    string
	}{
		{"confirmed", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
		},
			0, "CONFIRMED/confirmed/COUNT_EXACT"},
		{"duplicate", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
		}, 0, "REFUTED/conflicting/COUNT_OVER"},
		{"wrong subject", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-2", "Triage", "Follow-up"))
		},
			0, "REFUTED/refuted/COUNT_UNDER"},
		{"partial save", notes, func(t *testing.T, f *httprecords.Frappe) { f.Post(t, doctype, encounter("PAT-1", "Triage", "")) },
			0, "REFUTED/conflicting/FIELD_MISMATCH"},
		{"saved field", notes, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
		},
			0, "CONFIRMED/confirmed/FIELD_EQUAL"},
		{"401 after the action", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
			f.Rotate()
		}, 0, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"500 after the action", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
			f.FailWith(http.StatusInternalServerError)
		}, 0, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"slow past the deadline", written, func(t *testing.T, f *httprecords.Frappe) {
			f.Post(t, doctype, encounter("PAT-1", "Triage", "Follow-up"))
			f.SetDelay(5 * time.Second)
		}, 300 * time.Millisecond, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFrappe(t, true)
			f.Post(t, doctype, encounter("PAT-1", "Vitals", "earlier visit"))
			params := map[string]string{"patient_id": "PAT-1"}
			ip := configured(t, request(t, frappeSection(f, nil), params, map[string]string{"auth.value_env": f.Token()}))
			before := mustRead(t, ip, false)
			tt.act(t, f)
			timeout := 10 * time.Second
			if tt.timeout > 0 {
				timeout = tt.timeout
			}
			start := time.Now()
			after, err := read(t, ip, true, timeout)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Errorf("the read took %v with a %v deadline", took, timeout)
			}
			if got := httprecords.Judge(t, tt.effect, params, before, after, ""); got != tt.want {
				t.Errorf("verdict = %s, want %s (after: %+v)", got, tt.want, after)
			}
		})
	}
}

// TestUnreachable: every way a read can fail is an unreachable capture
// whose reason says what the server said, never a secret.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><body>Login required</body></html>"))
		case "/away":
			http.Redirect(w, r, "http://127.0.0.2:1/steal", http.StatusFound)
		case "/object":
			w.Write([]byte(`{"data": {"name": "x"}}`))
		case "/scalars":
			w.Write([]byte(`{"data": [1, 2]}`))
		}
	}))
	t.Cleanup(odd.Close)
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}()
	tests := []struct {
		name    string
		setup   func(f *httprecords.Frappe) (edit func(map[string]any), secrets map[string]string)
		timeout time.Duration
		want    []string
	}{
		{"wrong token, echoed by the server", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			f.EchoAuth(true)
			return nil, map[string]string{"auth.value_env": "token wrongkey:wrong-secret-value"}
		}, 0, []string{"401 Unauthorized", "AuthenticationError", "[redacted]"}},
		{"no credentials", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) { delete(s, "auth") }, nil
		}, 0, []string{"403 Forbidden", "PermissionError"}},
		{"server error", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			f.FailWith(http.StatusInternalServerError)
			return nil, nil
		}, 0, []string{"500 Internal Server Error", "Lost connection to MySQL"}},
		{"proxy in front of a stopped server", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			f.SetDown(true)
			return nil, nil
		}, 0, []string{"502 Bad Gateway", "nginx"}},
		{"slow past the deadline", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			f.SetDelay(5 * time.Second)
			return nil, nil
		}, 300 * time.Millisecond, []string{"no complete answer before the capture deadline"}},
		{"no list at records_key", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) { s["records_key"] = "message" }, nil
		}, 0, []string{"no list at records_key message", `{"data":[`}},
		{"records_key holds an object", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) {
				s["base_url"], s["path_params"], s["ca_file"], s["records_path"] = odd.URL, nil, "", "/object"
			}, nil
		}, 0, []string{"records_key data holds an object, not a list"}},
		{"list of scalars", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) {
				s["base_url"], s["path_params"], s["ca_file"], s["records_path"] = odd.URL, nil, "", "/scalars"
			}, nil
		}, 0, []string{"records_key data[0] is a number, not a record"}},
		{"HTML with 200", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) {
				s["base_url"], s["path_params"], s["ca_file"], s["records_path"] = odd.URL, nil, "", "/html"
			}, nil
		}, 0, []string{"not JSON", "Login required"}},
		{"redirect to another origin", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) {
				s["base_url"], s["path_params"], s["ca_file"], s["records_path"] = odd.URL, nil, "", "/away"
			}, nil
		}, 0, []string{"refused a redirect to another origin"}},
		{"connection refused", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) { s["base_url"], s["ca_file"] = closed, "" }, nil
		}, 0, []string{"connection refused"}},
		{"unknown certificate authority", func(f *httprecords.Frappe) (func(map[string]any), map[string]string) {
			return func(s map[string]any) { delete(s, "ca_file") }, nil
		}, 0, []string{"certificate signed by unknown authority"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFrappe(t, true)
			f.Post(t, doctype, encounter("PAT-1", "Triage", ""))
			edit, secrets := tt.setup(f)
			if secrets == nil {
				secrets = map[string]string{"auth.value_env": f.Token()}
			}
			ip := configured(t, request(t, frappeSection(f, edit), map[string]string{"patient_id": "PAT-1"}, secrets))
			timeout := 10 * time.Second
			if tt.timeout > 0 {
				timeout = tt.timeout
			}
			for _, after := range []bool{false, true} {
				got, err := read(t, ip, after, timeout)
				if err != nil {
					t.Fatal(err)
				}
				if got.Reachable || len(got.Records) != 0 {
					t.Fatalf("after=%v: reachable=%v with %d records; want unreachable", after, got.Reachable, len(got.Records))
				}
				for _, w := range tt.want {
					if !strings.Contains(got.Reason, w) {
						t.Errorf("after=%v: reason %q lacks %q", after, got.Reason, w)
					}
				}
				for _, secret := range secrets {
					if _, part, _ := strings.Cut(secret, " "); strings.Contains(got.Reason, secret) || part != "" && strings.Contains(got.Reason, part) {
						t.Errorf("after=%v: the reason carries the secret: %q", after, got.Reason)
					}
				}
			}
			// The preflight's own deadline must leave the adapter time to
			// answer "unreachable" before the call itself times out: it
			// probes for four fifths of it. At least 3 s here (still below
			// the slow server's 5 s), so that a loaded machine cannot turn
			// that answer into a transport timeout.
			ctx, cancel := context.WithTimeout(t.Context(), max(timeout, 3*time.Second))
			defer cancel()
			res, err := ip.TestConnection(ctx)
			if err != nil || res.Reachable {
				t.Errorf("TestConnection = %+v, %v; want unreachable and no error", res, err)
			}
		})
	}
}

// TestPagination reads a list spread over three pages, by offset and by
// next link, and refuses to judge a list longer than max_pages.
func TestPagination(t *testing.T) {
	t.Parallel()
	offsetPath := `/api/resource/Patient%20Encounter?fields=["*"]&filters=[["patient","=","{patient}"]]&order_by=creation%20asc`
	cursorPath := `/api/cursor/Patient%20Encounter?patient={patient}&page_size=2`
	tests := []struct {
		name       string
		path       string
		pagination map[string]any
		wantN      int
		wantReqs   int
		wantWhy    string
	}{
		{"offset and limit", offsetPath, map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 2}, 6, 4, ""},
		{"next link", cursorPath, map[string]any{"next_key": "links.next"}, 6, 3, ""},
		{"more pages than max_pages", cursorPath, map[string]any{"next_key": "links.next", "max_pages": 2}, 0, 2, "more than 2 pages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFrappe(t, true)
			var want []string
			for i := range 6 {
				want = append(want, f.Post(t, doctype, encounter("PAT-1", "Triage", fmt.Sprint(i))))
				f.Post(t, doctype, encounter("PAT-2", "Triage", fmt.Sprint(i)))
			}
			sec := frappeSection(f, func(s map[string]any) {
				s["records_path"] = tt.path
				if tt.pagination != nil {
					s["pagination"] = tt.pagination
				}
			})
			ip := configured(t, request(t, sec, map[string]string{"patient_id": "PAT-1"}, map[string]string{"auth.value_env": f.Token()}))
			reqs := f.Requests()
			got, err := read(t, ip, true, 10*time.Second)
			if n := f.Requests() - reqs; n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantWhy != "" {
				if err != nil || got.Reachable || got.Code != sdk.CodeReadIncomplete || !strings.Contains(got.Reason, tt.wantWhy) {
					t.Fatalf("read = %+v, %v; want unreachable, code %s, reason containing %q", got, err, sdk.CodeReadIncomplete, tt.wantWhy)
				}
				return
			}
			if err != nil || !got.Reachable {
				t.Fatalf("read: %v %+v", err, got)
			}
			var names []string
			for _, r := range got.Records {
				names = append(names, r["name"].(string))
			}
			if diff := cmp.Diff(want[:tt.wantN], names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTestConnection(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	f.Post(t, doctype, encounter("PAT-1", "Triage", ""))
	ip := configured(t, request(t, frappeSection(f, func(s map[string]any) { s["verify_tls"] = false; delete(s, "ca_file") }),
		map[string]string{"patient_id": "PAT-1"}, map[string]string{"auth.value_env": f.Token()}))
	res, err := ip.TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}
	if !strings.Contains(res.Message, "read 1 records in 1 page(s)") || !strings.Contains(res.Message, "the Authorization header") ||
		!strings.Contains(res.Message, "complete by single_response") || !strings.Contains(res.Message, "can also write is not checked") {
		t.Errorf("message %q", res.Message)
	}
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "verify_tls is false") || !strings.Contains(res.Warnings[1], "single_response without max_records") {
		t.Errorf("warnings %q; want the verify_tls and max_records warnings", res.Warnings)
	}
}

// TestPluginBinary drives the real verifier-adapter-rest through go-plugin,
// as the daemon does.
func TestPluginBinary(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	name := f.Post(t, doctype, encounter("PAT-1", "Triage", "x"))
	proc := adaptertest.Subprocess(t, pluginBinary)
	bin := &httprecords.Process{Instance: proc}
	info, err := bin.GetInfo(t.Context())
	if err != nil || info.Kind != Kind || info.Tier != sdk.TierIndependentSystem {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}
	if err := bin.Configure(t.Context(), request(t, frappeSection(f, nil), map[string]string{"patient_id": "PAT-1"}, map[string]string{"auth.value_env": f.Token()})); err != nil {
		t.Fatal(err)
	}
	got := mustRead(t, bin, true)
	if !got.Reachable || len(got.Records) != 1 || got.Records[0]["name"] != name {
		t.Errorf("read through the binary: %+v", got)
	}
}

func qualificationHarness(t *testing.T, binary string) adaptertest.Harness {
	f := httprecords.NewFrappe(t, true)
	const patient = "PAT-0001"
	path := `/api/resource/Patient%20Encounter?fields=["*"]&filters=[["patient","=","{patient}"]]&order_by=creation%20asc`
	config := func(token string) sdk.ConfigureRequest {
		return request(t, frappeSection(f, func(s map[string]any) {
			s["records_path"] = path
			s["pagination"] = map[string]any{"offset_param": "limit_start", "limit_param": "limit_page_length", "page_size": 5000}
		}), map[string]string{"patient_id": patient}, map[string]string{"auth.value_env": token}).Req
	}
	h := adaptertest.Harness{
		Params:         map[string]string{"patient_id": patient},
		Config:         func(t *testing.T) sdk.ConfigureRequest { return config(f.Token()) },
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest { return config("token " + f.APIKey + ":not-the-secret") },
		Selector:       map[string]string{"patient": patient, "encounter_type": "Triage"},
		IdentityField:  "name",
		Reset:          func(t *testing.T) { f.Reset(doctype) },
		WriteCorrect: func(t *testing.T) string {
			return f.Post(t, doctype, encounter(patient, "Triage", "Follow-up"))
		},
		WriteWrongEntity: func(t *testing.T) string {
			return f.Post(t, doctype, encounter("PAT-0002", "Triage", "Follow-up"))
		},
		WriteDuplicate: func(t *testing.T) string {
			return f.Post(t, doctype, encounter(patient, "Triage", "Follow-up"))
		},
		WriteStale: func(t *testing.T) (string, string) {
			const old = "2001-02-03 04:05:06.000000"
			doc := encounter(patient, "Triage", "old")
			doc["modified"] = old
			f.Post(t, doctype, doc)
			return "modified", old
		},
		WriteLater: func(t *testing.T, d time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(d)
				f.Insert(doctype, encounter(patient, "Triage", "late"))
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, up bool) { f.SetDown(!up) },
		SeedMany: func(t *testing.T, n int) {
			for range n {
				f.Insert(doctype, encounter(patient, "Triage", "seeded"))
			}
		},
	}
	if binary != "" {
		h.Binary = binary
	} else {
		h.Factory = New
	}
	return h
}

func TestQualification(t *testing.T) {
	adaptertest.Run(t, qualificationHarness(t, ""))
}

func TestQualificationSubprocess(t *testing.T) {
	adaptertest.Run(t, qualificationHarness(t, pluginBinary))
}

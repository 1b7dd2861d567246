package fhir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-fhir, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/fhir", "fhir", &pluginBinary)
}

var observationPaths = map[string]any{
	"id":      "id",
	"patient": "subject.reference",
	"status":  "status",
	"code":    "code.coding.0.code",
	"value":   "valueQuantity.value",
	"issued":  "issued",
}

func section(f *httprecords.FHIR, edit func(map[string]any)) map[string]any {
	sec := map[string]any{
		"kind":               "fhir",
		"base_url":           f.URL,
		"resource_type":      "Observation",
		"search_param_exprs": map[string]any{"patient": map[string]any{"param": "patient_ref"}},
		"field_paths":        observationPaths,
		"access_token_env":   "FHIR_TOKEN",
		"ca_file":            f.CAFile,
	}
	if edit != nil {
		edit(sec)
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

var patient = map[string]string{"patient_ref": "Patient/example"}

func configured(t testing.TB, f *httprecords.FHIR, edit func(map[string]any)) *httprecords.Process {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), request(t, section(f, edit), patient, map[string]string{"access_token_env": f.Token})); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// read captures once (after or before) and collects the whole read.
func read(t testing.TB, c *httprecords.Process, after bool, timeout time.Duration) (httprecords.Read, error) {
	t.Helper()
	return httprecords.Capture(t, c, after, timeout, "id")
}

func mustRead(t testing.TB, c *httprecords.Process, after bool) httprecords.Read {
	t.Helper()
	r, err := read(t, c, after, 10*time.Second)
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	return r
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	tests := []struct {
		name     string
		edit     func(map[string]any)
		params   map[string]string
		secrets  map[string]string
		wantPath string
		wantMsg  string
	}{
		{"wrong kind", func(s map[string]any) { s["kind"] = "rest" }, nil, nil, "kind", `reads kind "fhir"`},
		{"unknown key", func(s map[string]any) { s["search"] = "x" }, nil, nil, "search", "unknown key for kind fhir"},
		{"no resource type", func(s map[string]any) { delete(s, "resource_type") }, nil, nil, "resource_type", "write a FHIR resource type"},
		{"resource type with a path", func(s map[string]any) { s["resource_type"] = "Observation/1" }, nil, nil, "resource_type", "write a FHIR resource type"},
		{"missing run parameter", nil, map[string]string{}, nil, "search_param_exprs.patient", `the run has no parameter "patient_ref"`},
		{"comma in a run parameter (FHIR OR)", nil, map[string]string{"patient_ref": "Patient/example,Patient/other"}, nil,
			"search_param_exprs.patient", "holds a comma"},
		{"control character in a run parameter", nil, map[string]string{"patient_ref": "Patient/example\n"}, nil,
			"search_param_exprs.patient", "control character"},
		{"same parameter twice", func(s map[string]any) { s["search_params"] = map[string]any{"patient": "Patient/1"} }, nil, nil,
			"search_param_exprs.patient", "also set under search_params"},
		{"number as a search value", func(s map[string]any) { s["search_params"] = map[string]any{"_count": 10} }, nil, nil,
			"search_params._count", "numbers are written as strings"},
		{"empty path segment", func(s map[string]any) { s["field_paths"] = map[string]any{"code": "code..code"} }, nil, nil,
			"field_paths.code", "is empty"},
		{"path not a string", func(s map[string]any) { s["field_paths"] = map[string]any{"code": []string{"code"}} }, nil, nil,
			"field_paths.code", "must be a string"},
		{"token not delivered", nil, nil, map[string]string{}, "access_token_env", "FHIR_TOKEN"},
		{"max_pages negative", func(s map[string]any) { s["max_pages"] = -1 }, nil, nil, "max_pages", "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params, secrets := patient, map[string]string{"access_token_env": f.Token}
			if tt.params != nil {
				params = tt.params
			}
			if tt.secrets != nil {
				secrets = tt.secrets
			}
			err := inProcess(t).Configure(t.Context(), request(t, section(f, tt.edit), params, secrets))
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

// TestRecords: resources written through the server's API come back
// flattened by field_paths, numbers with their exact text, an explicit
// array index choosing the element, a path that leads nowhere leaving the
// field out; without field_paths the record is the resource.
func TestRecords(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	heavy := f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T10:00:00Z", "185"))
	exact := f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T11:00:00Z", "72.50"))
	f.Create(t, "Observation", httprecords.Observation("Patient/other", "final", "2026-01-01T11:00:00Z", "80"))
	pat := f.Create(t, "Patient", httprecords.FHIRFixture("patient-example.json"))

	tests := []struct {
		name  string
		edit  func(map[string]any)
		check func(t *testing.T, recs []sdk.Record)
	}{
		{"observations by field_paths", func(s map[string]any) {
			s["field_paths"] = map[string]any{"id": "id", "patient": "subject.reference", "value": "valueQuantity.value",
				"code": "code.coding.0.code", "second_code": "code.coding.1.code", "note": "note.0.text", "status": "status"}
			s["search_params"] = map[string]any{"status": "final", "code": "http://loinc.org|29463-7"}
		}, func(t *testing.T, recs []sdk.Record) {
			want := []sdk.Record{
				{"id": heavy, "patient": "Patient/example", "value": json.Number("185"), "code": "29463-7", "second_code": "3141-9", "status": "final"},
				{"id": exact, "patient": "Patient/example", "value": json.Number("72.50"), "code": "29463-7", "second_code": "3141-9", "status": "final"},
			}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		}},
		{"patients by field_paths", func(s map[string]any) {
			s["resource_type"] = "Patient"
			delete(s, "search_param_exprs")
			s["search_params"] = map[string]any{"family": "Chalmers"}
			s["field_paths"] = map[string]any{"id": "id", "family": "name.0.family", "middle": "name.0.given.1", "mrn": "identifier.0.value", "active": "active", "born": "birthDate"}
		}, func(t *testing.T, recs []sdk.Record) {
			want := []sdk.Record{{"id": pat, "family": "Chalmers", "middle": "James", "mrn": "12345", "active": true, "born": "1974-12-25"}}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		}},
		{"whole resources without field_paths", func(s map[string]any) {
			s["resource_type"] = "Patient"
			delete(s, "search_param_exprs")
			delete(s, "field_paths")
		}, func(t *testing.T, recs []sdk.Record) {
			if len(recs) != 1 || recs[0]["resourceType"] != "Patient" || recs[0]["id"] != pat || recs[0]["gender"] != "male" {
				t.Fatalf("records %v", recs)
			}
			if _, nested := recs[0]["name"].([]any); !nested {
				t.Errorf("name is %T; a whole resource keeps its nested values", recs[0]["name"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustRead(t, configured(t, f, tt.edit), true)
			if !got.Reachable {
				t.Fatalf("unreachable: %s", got.Reason)
			}
			tt.check(t, got.Records)
		})
	}
}

// TestVerdicts: before read -> the automation creates through the FHIR API
// -> after read -> the daemon's judge.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	const written = `{kind: record_written, match: {patient: {param: patient_ref}, status: final}, count_new_only: true}`
	const value = `{kind: field_equals, match: {patient: {param: patient_ref}, status: final}, field: value, value: "185"}`
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	create := func(t *testing.T, f *httprecords.FHIR, subject, v string) {
		f.Create(t, "Observation", httprecords.Observation(subject, "final", now(), v))
	}
	tests := []struct {
		name    string
		effect  string
		act     func(t *testing.T, f *httprecords.FHIR)
		timeout time.Duration
		want    string
	}{
		{"confirmed", written, func(t *testing.T, f *httprecords.FHIR) { create(t, f, "Patient/example", "185") }, 0, "CONFIRMED/confirmed/COUNT_EXACT"},
		{"duplicate", written, func(t *testing.T, f *httprecords.FHIR) {
			create(t, f, "Patient/example", "185")
			create(t, f, "Patient/example", "185")
		}, 0, "REFUTED/conflicting/COUNT_OVER"},
		{"wrong subject", written, func(t *testing.T, f *httprecords.FHIR) { create(t, f, "Patient/other", "185") }, 0, "REFUTED/refuted/COUNT_UNDER"},
		// The save spelt the subject as an absolute URL of this server:
		// the same patient, read as the contract's Patient/example.
		{"absolute subject of this server", written, func(t *testing.T, f *httprecords.FHIR) { create(t, f, f.URL+"/Patient/example", "185") }, 0, "CONFIRMED/confirmed/COUNT_EXACT"},
		{"absolute subject, value read back", value, func(t *testing.T, f *httprecords.FHIR) { create(t, f, f.URL+"/Patient/example", "185") }, 0, "CONFIRMED/confirmed/FIELD_EQUAL"},
		{"value read back", value, func(t *testing.T, f *httprecords.FHIR) { create(t, f, "Patient/example", "185.0") }, 0, "CONFIRMED/confirmed/FIELD_EQUAL"},
		{"partial save", value, func(t *testing.T, f *httprecords.FHIR) { create(t, f, "Patient/example", "") }, 0, "REFUTED/conflicting/FIELD_MISMATCH"},
		{"401 after the action", written, func(t *testing.T, f *httprecords.FHIR) {
			create(t, f, "Patient/example", "185")
			f.Rotate()
		}, 0, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"500 after the action", written, func(t *testing.T, f *httprecords.FHIR) {
			create(t, f, "Patient/example", "185")
			f.FailWith(http.StatusInternalServerError)
		}, 0, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"slow past the deadline", written, func(t *testing.T, f *httprecords.FHIR) {
			create(t, f, "Patient/example", "185")
			f.SetDelay(5 * time.Second)
		}, 300 * time.Millisecond, "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFHIR(t, true)
			f.Create(t, "Observation", httprecords.Observation("Patient/example", "preliminary", now(), "180"))
			ip := configured(t, f, nil)
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
			if got := httprecords.Judge(t, tt.effect, patient, before, after, ""); got != tt.want {
				t.Errorf("verdict = %s, want %s (after: %+v)", got, tt.want, after)
			}
		})
	}
}

// TestUnreachableReasons: an OperationOutcome, a 401/403 or any failed
// search is unreachable, with the outcome's diagnostics.
func TestUnreachableReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault func(f *httprecords.FHIR)
		edit  func(map[string]any)
		want  string
	}{
		{"token refused", func(f *httprecords.FHIR) { f.Rotate() }, nil,
			"answered 401 Unauthorized with an OperationOutcome: error login: Authentication failed — The access token is missing, expired or not valid"},
		{"server failure", func(f *httprecords.FHIR) { f.FailWith(http.StatusInternalServerError) }, nil,
			"500 Internal Server Error with an OperationOutcome: fatal exception: Failed to call access method"},
		{"forbidden", func(f *httprecords.FHIR) { f.FailWith(http.StatusForbidden) }, nil, "403 Forbidden with an OperationOutcome"},
		{"outcome instead of a bundle", func(f *httprecords.FHIR) { f.OutcomeAt200(true) }, nil,
			"answered an OperationOutcome instead of a Bundle: error too-costly: The search is too costly to process"},
		{"unknown search parameter", func(f *httprecords.FHIR) {}, func(s map[string]any) { s["search_params"] = map[string]any{"colour": "red"} },
			`400 Bad Request with an OperationOutcome: error processing: Unknown search parameter "colour"`},
		{"error outcome inside the searchset", func(f *httprecords.FHIR) { f.OutcomeEntry("error") }, nil,
			"the searchset carries an OperationOutcome: error informational: The search ran against a replica"},
		{"proxy down", func(f *httprecords.FHIR) { f.SetDown(true) }, nil, "502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFHIR(t, true)
			f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T00:00:00Z", "185"))
			secret := f.Token
			ip := configured(t, f, tt.edit)
			tt.fault(f)
			got, err := read(t, ip, true, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reachable || !strings.Contains(got.Reason, tt.want) {
				t.Errorf("read = reachable %v, reason %q\nwant unreachable with %q", got.Reachable, got.Reason, tt.want)
			}
			if strings.Contains(got.Reason, secret) {
				t.Error("the reason carries the token")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if res, err := ip.TestConnection(ctx); err != nil || res.Reachable {
				t.Errorf("TestConnection = %+v, %v; want unreachable and no error", res, err)
			}
		})
	}
}

// TestPaging follows link[relation=next] through the server's pages.
func TestPaging(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		count    string
		maxPages int
		outcome  string
		wantReqs int
		wantErr  string
	}{
		{"three pages", "1", 0, "", 3, ""},
		{"one page", "10", 0, "", 1, ""},
		{"a warning outcome is not a failure", "2", 0, "warning", 2, ""},
		{"more pages than max_pages", "1", 2, "", 2, "more than 2 pages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := httprecords.NewFHIR(t, true)
			var want []any
			for i := range 3 {
				want = append(want, f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T00:00:00Z", fmt.Sprint(180+i))))
				f.Create(t, "Observation", httprecords.Observation("Patient/other", "final", "2026-01-01T00:00:00Z", "1"))
			}
			f.OutcomeEntry(tt.outcome)
			ip := configured(t, f, func(s map[string]any) {
				s["search_params"] = map[string]any{"_count": tt.count}
				if tt.maxPages > 0 {
					s["max_pages"] = tt.maxPages
				}
			})
			reqs := f.Requests()
			got, err := read(t, ip, true, 10*time.Second)
			if n := f.Requests() - reqs; n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantErr != "" {
				if err != nil || got.Reachable || got.Code != sdk.CodeReadIncomplete || !strings.Contains(got.Reason, tt.wantErr) {
					t.Fatalf("read = %+v, %v; want unreachable, %s, %q", got, err, sdk.CodeReadIncomplete, tt.wantErr)
				}
				return
			}
			if err != nil || !got.Reachable {
				t.Fatalf("read: %v %+v", err, got)
			}
			var ids []any
			for _, r := range got.Records {
				ids = append(ids, r["id"])
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBundleFaults serves hand-written Bundles: a total the pages do not
// add up to, and a next link to another server.
func TestBundleFaults(t *testing.T) {
	t.Parallel()
	obs := string(httprecords.FHIRFixture("observation-example.json"))
	var base string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", httprecords.FHIRContentType)
		switch r.URL.Query().Get("page") {
		case "":
			next := base + "/Observation?page=2"
			if r.URL.Query().Get("patient") == "Patient/away" {
				next = "http://127.0.0.2:1/fhir/Observation?page=2"
			}
			fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","total":3,"link":[{"relation":"self","url":"%s/Observation"},{"relation":"next","url":"%s"}],"entry":[{"fullUrl":"%s/Observation/example","resource":%s,"search":{"mode":"match"}}]}`, base, next, base, obs)
		case "2":
			fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"%s/Observation?page=2"}],"entry":[{"fullUrl":"%s/Observation/example","resource":%s,"search":{"mode":"match"}}]}`, base, base, obs)
		}
	}))
	t.Cleanup(srv.Close)
	base = srv.URL + "/fhir"
	for _, tt := range []struct{ patient, want, code string }{
		{"Patient/example", "the server declares 3 records (Bundle.total) but the read holds 2", sdk.CodeReadIncomplete},
		{"Patient/away", "leads to another origin", ""},
	} {
		ip := inProcess(t)
		sec := map[string]any{"base_url": base, "resource_type": "Observation", "search_params": map[string]any{"patient": tt.patient}}
		if err := ip.Configure(t.Context(), request(t, sec, nil, nil)); err != nil {
			t.Fatal(err)
		}
		// Every page is read before the capture answers: a failure on any
		// of them, or a count that misses Bundle.total, is an unreachable
		// capture (the latter READ_INCOMPLETE: the server answered).
		got, err := read(t, ip, true, 10*time.Second)
		if err != nil || got.Reachable || got.Code != tt.code || !strings.Contains(got.Reason, tt.want) {
			t.Errorf("%s: read = %+v, %v; want unreachable, code %q, saying %q", tt.patient, got, err, tt.code, tt.want)
		}
	}
}

func TestTestConnection(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T00:00:00Z", "185"))
	ip := configured(t, f, func(s map[string]any) { s["field_paths"] = map[string]any{"patient": "subject.reference"} })
	res, err := ip.TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}
	if !strings.Contains(res.Message, "read 1 records in 1 page(s); the server reports a total of 1, and this credential read 1") ||
		!strings.Contains(res.Message, "checked against Bundle.total") || !strings.Contains(res.Message, "a bearer token") {
		t.Errorf("message %q", res.Message)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "field_paths maps no id") {
		t.Errorf("warnings %q", res.Warnings)
	}
}

func TestPluginBinary(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	id := f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T00:00:00Z", "185"))
	proc := adaptertest.Subprocess(t, pluginBinary)
	bin := &httprecords.Process{Instance: proc}
	if err := bin.Configure(t.Context(), request(t, section(f, nil), patient, map[string]string{"access_token_env": f.Token})); err != nil {
		t.Fatal(err)
	}
	got := mustRead(t, bin, true)
	if !got.Reachable || len(got.Records) != 1 || got.Records[0]["id"] != id || got.Records[0]["value"] != json.Number("185") {
		t.Errorf("read through the binary: %+v", got)
	}
}

func qualificationHarness(t *testing.T, binary string) adaptertest.Harness {
	f := httprecords.NewFHIR(t, true)
	config := func(token string) sdk.ConfigureRequest {
		return request(t, section(f, func(s map[string]any) { s["search_params"] = map[string]any{"_count": "2000"} }),
			patient, map[string]string{"access_token_env": token}).Req
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	minimal := []byte(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":"Patient/example"},"issued":"2026-01-01T00:00:00Z","valueQuantity":{"value":185,"unit":"lbs"}}`)
	h := adaptertest.Harness{
		Params:         patient,
		Config:         func(t *testing.T) sdk.ConfigureRequest { return config(f.Token) },
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest { return config("expired-token") },
		Selector:       map[string]string{"patient": "Patient/example", "status": "final"},
		Reset:          func(t *testing.T) { f.Reset("Observation") },
		WriteCorrect: func(t *testing.T) string {
			return f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", now(), "185"))
		},
		WriteWrongEntity: func(t *testing.T) string {
			return f.Create(t, "Observation", httprecords.Observation("Patient/other", "final", now(), "185"))
		},
		WriteDuplicate: func(t *testing.T) string {
			return f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", now(), "185"))
		},
		WriteStale: func(t *testing.T) (string, string) {
			const old = "2001-02-03T04:05:06Z"
			f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", old, "185"))
			return "issued", old
		},
		WriteLater: func(t *testing.T, d time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(d)
				f.Store("Observation", minimal)
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, up bool) { f.SetDown(!up) },
		SeedMany: func(t *testing.T, n int) {
			for range n {
				f.Store("Observation", minimal)
			}
		},
		// A server that answers a list where the resource has one value:
		// status, which the contract matches on, holds two.
		WriteUnshapeable: func(t *testing.T) string {
			f.Store("Observation", bytes.Replace(minimal, []byte(`"status":"final"`), []byte(`"status":["final","amended"]`), 1))
			return "status"
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

// TestFieldPathSelectors: field_paths pick an element of an array of
// objects by a key (an identifier by its system, a coding by its system,
// dots and colons inside the value), and a selector two elements satisfy
// fails the read rather than guess.
func TestFieldPathSelectors(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	var obs map[string]any
	if err := json.Unmarshal(httprecords.Observation("Patient/example", "final", "2026-01-01T00:00:00Z", "185"), &obs); err != nil {
		t.Fatal(err)
	}
	obs["identifier"] = []any{
		map[string]any{"system": "urn:mrn", "value": "M-1"},
		map[string]any{"system": "urn:claims", "value": "CLM-42"},
	}
	body, _ := json.Marshal(obs)
	id := f.Create(t, "Observation", body)
	ip := configured(t, f, func(s map[string]any) {
		s["field_paths"] = map[string]any{"id": "id", "claim": "identifier[system=urn:claims].value", "snomed": "code.coding[system=http://snomed.info/sct].code", "first": "code.coding[0].code"}
	})
	got, err := read(t, ip, true, 10*time.Second)
	if err != nil || !got.Reachable || len(got.Records) != 1 {
		t.Fatalf("read = %+v, %v", got, err)
	}
	want := sdk.Record{"id": id, "claim": "CLM-42", "snomed": "27113001", "first": "29463-7"}
	if diff := cmp.Diff(want, got.Records[0]); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if v := httprecords.Judge(t, `{kind: field_equals, match: {claim: CLM-42}, field: snomed, value: "27113001"}`, nil, got, got, ""); v != "CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("field_equals on a selected identifier: %s", v)
	}

	ip = configured(t, f, func(s map[string]any) {
		s["field_paths"] = map[string]any{"id": "id", "loinc": "code.coding[system=http://loinc.org].code"}
	})
	got, err = read(t, ip, true, 10*time.Second)
	if err != nil || got.Reachable || !strings.Contains(got.Reason, "2 elements have system=http://loinc.org") {
		t.Errorf("an ambiguous selector: read = %+v, %v; want unreachable naming it", got, err)
	}

	err = inProcess(t).Configure(t.Context(), request(t, section(f, func(s map[string]any) {
		s["field_paths"] = map[string]any{"claim": "identifier[system=urn:claims.value"}
	}), patient, map[string]string{"access_token_env": f.Token}))
	var ce *refusal.Error
	if !errors.As(err, &ce) || ce.Path != "field_paths.claim" {
		t.Errorf("a malformed path: Configure = %v; want field_paths.claim refused", err)
	}
}

// TestReferencesToThisServerReadRelative: a reference saved as an absolute
// URL of the server's own base reads in its relative form, wherever it is
// in the resource (field_paths or the whole resource); a reference to
// another server, or an absolute URL that is not [type]/[id] under the
// base, stays as saved.
func TestReferencesToThisServerReadRelative(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	other := "https://other.example/fhir/Patient/example"
	save := func(subject, performer string) string {
		body := fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},`+
			`"subject":{"reference":%q},"performer":[{"reference":%q}],"issued":"2026-01-01T00:00:00Z","valueQuantity":{"value":185}}`, subject, performer)
		return f.Create(t, "Observation", []byte(body))
	}
	own := save(f.URL+"/Patient/example", f.URL+"/Practitioner/pr-1/_history/2")
	foreign := save(other, f.URL+"/Practitioner")
	relative := save("Patient/example", "Practitioner/pr-1")

	byFields := mustRead(t, configured(t, f, func(s map[string]any) {
		delete(s, "search_param_exprs")
		s["search_params"] = map[string]any{"status": "final"}
		s["field_paths"] = map[string]any{"id": "id", "patient": "subject.reference", "performer": "performer.0.reference"}
	}), true)
	want := []sdk.Record{
		{"id": own, "patient": "Patient/example", "performer": "Practitioner/pr-1/_history/2"},
		{"id": foreign, "patient": other, "performer": f.URL + "/Practitioner"},
		{"id": relative, "patient": "Patient/example", "performer": "Practitioner/pr-1"},
	}
	if !byFields.Reachable {
		t.Fatalf("unreachable: %s", byFields.Reason)
	}
	if diff := cmp.Diff(want, byFields.Records); diff != "" {
		t.Errorf("records by field_paths (-want +got):\n%s", diff)
	}

	whole := mustRead(t, configured(t, f, func(s map[string]any) {
		delete(s, "field_paths")
	}), true)
	if !whole.Reachable || len(whole.Records) != 2 {
		t.Fatalf("the search for patient Patient/example read %d records (reachable %v, %s); want the two saved for it, the absolute spelling included", len(whole.Records), whole.Reachable, whole.Reason)
	}
	for _, r := range whole.Records {
		subject, _ := r["subject"].(map[string]any)
		if subject["reference"] != "Patient/example" {
			t.Errorf("resource %v: subject.reference %v; want Patient/example", r["id"], subject["reference"])
		}
	}
}

// TestListInAReadField: a field_paths path that ends at an array gives the
// record a list, which no contract value matches. When a contract selects
// on or reads that field the read fails, naming the record and the field
// (never a read in which the Observation is invisible); when none does,
// the list is reported as it is.
func TestListInAReadField(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	id := f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T10:00:00Z", "185"))
	ip := configured(t, f, func(s map[string]any) {
		s["field_paths"] = map[string]any{"id": "id", "patient": "subject.reference", "coding": "code.coding"}
	})
	read := func(req sdk.CaptureRequest) httprecords.Read {
		req.CaptureID, req.Timeout, req.IdentityField, req.EffectKind = "list", 10*time.Second, "id", "record_written"
		capt, err := ip.CaptureAfter(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := capt.Records()
		if err != nil {
			t.Fatal(err)
		}
		return httprecords.Read{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}
	}
	for _, req := range []sdk.CaptureRequest{
		{ReadFields: []string{"patient", "coding"}},
		{Selector: map[string]string{"coding": "29463-7"}},
	} {
		r := read(req)
		if r.Reachable {
			t.Fatalf("read fields %v, selector %v: read as usable (%v); want the read failed", req.ReadFields, req.Selector, r.Records)
		}
		if want := fmt.Sprintf("record with id %s, field coding: holds a list of 3 values", id); !strings.Contains(r.Reason, want) {
			t.Errorf("reason %q; want it to say %q", r.Reason, want)
		}
	}
	r := read(sdk.CaptureRequest{ReadFields: []string{"patient"}, Selector: map[string]string{"patient": "Patient/example"}})
	if !r.Reachable || len(r.Records) != 1 {
		t.Fatalf("a read no contract of which reads coding: %+v; want the one record", r)
	}
	if coding, ok := r.Records[0]["coding"].([]any); !ok || len(coding) != 3 {
		t.Errorf("coding = %#v; want the list of the three codings", r.Records[0]["coding"])
	}
}

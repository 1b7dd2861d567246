package compensate

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

const doctype = "Patient Encounter"

func frappeSection(f *httprecords.Frappe) map[string]any {
	return map[string]any{
		"kind":        "rest_delete",
		"base_url":    f.URL,
		"delete_path": "/api/resource/Patient%20Encounter/{name}",
		"auth":        map[string]any{"header": "Authorization", "value_env": "ERP_WRITE_TOKEN"},
		"ca_file":     f.CAFile,
	}
}

func mustParse(t *testing.T, section map[string]any, secrets map[string]string) *Compensator {
	t.Helper()
	c, err := Parse(section, secrets)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// duplicates writes n identical encounters through the API and returns
// them as the records a plan would name.
func duplicates(t *testing.T, f *httprecords.Frappe, n int) []map[string]any {
	var recs []map[string]any
	for range n {
		name := f.Post(t, doctype, map[string]any{"patient": "PAT-1", "encounter_type": "Triage"})
		recs = append(recs, map[string]any{"name": name, "patient": "PAT-1", "encounter_type": "Triage"})
	}
	return recs
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	base := func(edit func(map[string]any)) map[string]any {
		s := map[string]any{"kind": "rest_delete", "base_url": "https://127.0.0.1:1", "delete_path": "/api/resource/Encounter/{name}",
			"auth": map[string]any{"bearer_env": "ERP_WRITE_TOKEN"}}
		edit(s)
		return s
	}
	secrets := map[string]string{"auth.bearer_env": "tok"}
	tests := []struct {
		name     string
		section  map[string]any
		secrets  map[string]string
		wantPath string
		wantMsg  string
	}{
		{"no kind", base(func(s map[string]any) { delete(s, "kind") }), secrets, "kind", "must be rest_delete"},
		{"other kind", base(func(s map[string]any) { s["kind"] = "sql_delete" }), secrets, "kind", "must be rest_delete"},
		{"unknown key", base(func(s map[string]any) { s["method"] = "POST" }), secrets, "method", "unknown key"},
		{"no base_url", base(func(s map[string]any) { delete(s, "base_url") }), secrets, "base_url", "missing"},
		{"base_url with a query", base(func(s map[string]any) { s["base_url"] = "https://h/?x=1" }), secrets, "base_url", "without credentials, query"},
		{"no delete_path", base(func(s map[string]any) { delete(s, "delete_path") }), secrets, "delete_path", "missing"},
		{"no placeholder", base(func(s map[string]any) { s["delete_path"] = "/api/resource/Encounter" }), secrets, "delete_path", "same URL for every duplicate"},
		{"placeholder only in the query", base(func(s map[string]any) { s["delete_path"] = "/api/delete?name={name}" }), secrets, "delete_path", "in its path"},
		{"space in delete_path", base(func(s map[string]any) { s["delete_path"] = "/api/resource/Patient Encounter/{name}" }), secrets, "delete_path", "%20"},
		{"two auth styles", base(func(s map[string]any) { s["auth"] = map[string]any{"bearer_env": "A", "basic_env": "B"} }), secrets, "auth", "exactly one"},
		{"secret not delivered", base(func(s map[string]any) {}), map[string]string{}, "auth.bearer_env", "ERP_WRITE_TOKEN"},
		{"unknown auth key", base(func(s map[string]any) { s["auth"] = map[string]any{"password_env": "X"} }), secrets, "auth.password_env", "unknown key"},
		{"timeout zero", base(func(s map[string]any) { s["timeout_s"] = 0.0 }), secrets, "timeout_s", "above 0"},
		{"ca_file missing", base(func(s map[string]any) { s["ca_file"] = "/nonexistent.pem" }), secrets, "ca_file", "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.section, tt.secrets)
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse = %v; want an *refusal.Error", err)
			}
			if ce.Path != "compensator."+tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q; want path compensator.%s and %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "compensator."+tt.wantPath+": ") {
				t.Errorf("error text %q does not start with the section path", err)
			}
		})
	}
}

func TestOffUnlessConfigured(t *testing.T) {
	t.Parallel()
	c, err := Parse(nil, nil)
	if c != nil || err != nil {
		t.Fatalf("Parse(nil) = %v, %v; want nil, nil", c, err)
	}
	if deleted, err := c.Delete(t.Context(), []map[string]any{{"name": "x"}}); !errors.Is(err, ErrNotConfigured) || len(deleted) != 0 {
		t.Errorf("Delete on no compensator = %v, %v; want ErrNotConfigured", deleted, err)
	}
}

func TestSecretRefs(t *testing.T) {
	t.Parallel()
	got := SecretRefs(map[string]any{"kind": "rest_delete", "auth": map[string]any{"header": "X-Key", "value_env": "ERP_KEY"}, "ca_file": "/x"})
	if diff := cmp.Diff(map[string]string{"auth.value_env": "ERP_KEY"}, got); diff != "" {
		t.Errorf("SecretRefs (-want +got):\n%s", diff)
	}
	// The daemon may deliver slots as it collected them inside a candidate.
	c := mustParse(t, map[string]any{"kind": "rest_delete", "base_url": "https://127.0.0.1:1", "delete_path": "/x/{id}", "auth": map[string]any{"bearer_env": "T"}},
		map[string]string{"compensator.auth.bearer_env": "tok"})
	h := http.Header{}
	c.creds.Set(h)
	if h.Get("Authorization") != "Bearer tok" {
		t.Errorf("credential from a prefixed slot not used")
	}
}

// TestDeleteDuplicates deletes two of three duplicates from a real
// Frappe-shaped server over TLS and leaves the kept one.
func TestDeleteDuplicates(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	recs := duplicates(t, f, 3)
	other := f.Post(t, doctype, map[string]any{"patient": "PAT-2", "encounter_type": "Triage"})
	c := mustParse(t, frappeSection(f), map[string]string{"auth.value_env": f.Token()})
	deleted, err := c.Delete(t.Context(), recs[1:])
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if diff := cmp.Diff(recs[1:], deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{recs[0]["name"].(string), other}, f.Names(doctype)); diff != "" {
		t.Errorf("left in the store (-want +got):\n%s", diff)
	}
}

// TestStopsAtFirstFailure: a DELETE that fails half-way stops the run; the
// records before it are reported deleted and the rest are untouched.
func TestStopsAtFirstFailure(t *testing.T) {
	t.Parallel()
	t.Run("record already gone (404)", func(t *testing.T) {
		t.Parallel()
		f := httprecords.NewFrappe(t, true)
		recs := duplicates(t, f, 4)
		// Someone else deletes the second duplicate before the compensator.
		c := mustParse(t, frappeSection(f), map[string]string{"auth.value_env": f.Token()})
		if _, err := c.Delete(t.Context(), recs[2:3]); err != nil {
			t.Fatal(err)
		}
		deleted, err := c.Delete(t.Context(), recs[1:])
		var de *DeleteError
		if !errors.As(err, &de) || de.Index != 1 || de.Status != http.StatusNotFound || !strings.Contains(de.Reason, "DoesNotExistError") {
			t.Fatalf("Delete = %v; want a DeleteError at index 1 with 404", err)
		}
		if diff := cmp.Diff(recs[1:2], deleted); diff != "" {
			t.Errorf("deleted so far (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{recs[0]["name"].(string), recs[3]["name"].(string)}, f.Names(doctype)); diff != "" {
			t.Errorf("left in the store (-want +got):\n%s", diff)
		}
	})
	t.Run("server error on the second DELETE", func(t *testing.T) {
		t.Parallel()
		f := httprecords.NewFrappe(t, false)
		recs := duplicates(t, f, 4)
		var mu sync.Mutex
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.EscapedPath())
			n := len(seen)
			mu.Unlock()
			if n == 2 {
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte(`{"exc_type": "LinkExistsError", "exception": "Cannot delete: linked with Vital Signs VS-0001"}`))
				return
			}
			f.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		sec := frappeSection(f)
		sec["base_url"] = srv.URL
		delete(sec, "ca_file")
		c := mustParse(t, sec, map[string]string{"auth.value_env": f.Token()})
		deleted, err := c.Delete(t.Context(), recs[1:])
		var de *DeleteError
		if !errors.As(err, &de) || de.Index != 1 || de.Status != 500 || !strings.Contains(de.Reason, "LinkExistsError") {
			t.Fatalf("Delete = %v; want a DeleteError at index 1 with 500", err)
		}
		if diff := cmp.Diff(recs[1:2], deleted); diff != "" {
			t.Errorf("deleted so far (-want +got):\n%s", diff)
		}
		want := []string{
			"DELETE /api/resource/Patient%20Encounter/" + recs[1]["name"].(string),
			"DELETE /api/resource/Patient%20Encounter/" + recs[2]["name"].(string),
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if names := f.Names(doctype); len(names) != 3 || !slices.Contains(names, recs[3]["name"].(string)) {
			t.Errorf("left in the store: %v", names)
		}
	})
	t.Run("refused credentials, echoed", func(t *testing.T) {
		t.Parallel()
		f := httprecords.NewFrappe(t, true)
		f.EchoAuth(true)
		recs := duplicates(t, f, 2)
		const wrong = "token k:wrong-write-secret"
		c := mustParse(t, frappeSection(f), map[string]string{"auth.value_env": wrong})
		deleted, err := c.Delete(t.Context(), recs[1:])
		var de *DeleteError
		if !errors.As(err, &de) || de.Index != 0 || de.Status != http.StatusUnauthorized || len(deleted) != 0 {
			t.Fatalf("Delete = %v, %v; want nothing deleted and a 401 at index 0", deleted, err)
		}
		if strings.Contains(err.Error(), "wrong-write-secret") || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("the error does not redact the credential: %v", err)
		}
	})
	t.Run("slow server", func(t *testing.T) {
		t.Parallel()
		f := httprecords.NewFrappe(t, true)
		recs := duplicates(t, f, 2)
		f.SetDelay(5 * time.Second)
		sec := frappeSection(f)
		sec["timeout_s"] = 0.3
		c := mustParse(t, sec, map[string]string{"auth.value_env": f.Token()})
		start := time.Now()
		deleted, err := c.Delete(t.Context(), recs)
		var de *DeleteError
		if !errors.As(err, &de) || de.Index != 0 || de.Status != 0 || !strings.Contains(de.Reason, "may or may not be deleted") || len(deleted) != 0 {
			t.Fatalf("Delete = %v, %v; want a timeout at index 0", deleted, err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("took %v with a 0.3s timeout", took)
		}
	})
}

// TestAddressesEveryRecordFirst: a record that cannot fill the template
// deletes nothing at all; values are escaped for their place in the URL,
// and a path value may not climb out of its segment.
func TestAddressesEveryRecordFirst(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c := mustParse(t, map[string]any{"kind": "rest_delete", "base_url": srv.URL + "/fhir/", "delete_path": "/{type}/{id}?_cascade={mode}"}, nil)

	_, err := c.Delete(t.Context(), []map[string]any{
		{"type": "Observation", "id": json.Number("7"), "mode": "delete"},
		{"type": "Observation", "id": "..", "mode": "delete"},
	})
	if err == nil || !strings.Contains(err.Error(), "another resource") || len(seen) != 0 {
		t.Fatalf("Delete = %v after %d requests; want a refusal before any request", err, len(seen))
	}
	_, err = c.Delete(t.Context(), []map[string]any{{"type": "Observation", "mode": "x"}})
	if err == nil || !strings.Contains(err.Error(), `"id" is missing or null`) || len(seen) != 0 {
		t.Fatalf("Delete = %v; want a refusal for the missing id", err)
	}
	for _, id := range []string{"a/b", "../../admin", `..\x`} {
		_, err = c.Delete(t.Context(), []map[string]any{{"type": "Observation", "id": "7", "mode": "x"}, {"type": "Observation", "id": id, "mode": "x"}})
		if err == nil || !strings.Contains(err.Error(), "path separator") || len(seen) != 0 {
			t.Fatalf("Delete(id %q) = %v after %d requests; want a refusal before any request", id, err, len(seen))
		}
	}
	_, err = c.Delete(t.Context(), []map[string]any{{"type": "Observation", "id": "7", "mode": "x\x00"}})
	if err == nil || !strings.Contains(err.Error(), "control character") || len(seen) != 0 {
		t.Fatalf("Delete = %v; want a refusal for the NUL", err)
	}
	deleted, err := c.Delete(t.Context(), []map[string]any{{"type": "Observation", "id": "a;b c", "mode": "x&y=1"}})
	if err != nil || len(deleted) != 1 {
		t.Fatalf("Delete = %v, %v", deleted, err)
	}
	if want := []string{"DELETE /fhir/Observation/a%3Bb%20c?_cascade=x%26y%3D1"}; !slices.Equal(seen, want) {
		t.Errorf("requests %q, want %q", seen, want)
	}
}

// TestApplies: the compensator repairs only an irreversible record_written
// refuted for duplicates alone, and only when the deployment configures one.
func TestApplies(t *testing.T) {
	t.Parallel()
	section := map[string]any{"kind": "rest_delete"}
	dup := func() *judge.Verdict {
		return &judge.Verdict{Decision: judge.Refuted, Reasons: []judge.Reason{{Code: judge.ReasonCountOver}},
			Matched: []judge.Record{{"id": "2"}, {"id": "1"}}}
	}
	contract := func(kind judge.Kind, risk judge.Risk) *judge.Contract {
		return &judge.Contract{Kind: kind, Risk: risk, ExpectedCount: 1, IdentityField: "id"}
	}
	tests := map[string]struct {
		section  map[string]any
		contract *judge.Contract
		verdict  *judge.Verdict
		want     bool
	}{
		"duplicates":         {section, contract(judge.RecordWritten, judge.Irreversible), dup(), true},
		"no compensator":     {nil, contract(judge.RecordWritten, judge.Irreversible), dup(), false},
		"reversible":         {section, contract(judge.RecordWritten, judge.Reversible), dup(), false},
		"field_equals":       {section, contract(judge.FieldEquals, judge.Irreversible), dup(), false},
		"confirmed":          {section, contract(judge.RecordWritten, judge.Irreversible), &judge.Verdict{Decision: judge.Confirmed}, false},
		"missing, not extra": {section, contract(judge.RecordWritten, judge.Irreversible), &judge.Verdict{Decision: judge.Refuted, Reasons: []judge.Reason{{Code: judge.ReasonCountUnder}}}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plan, ok := Applies(tt.section, tt.contract, tt.verdict)
			if ok != tt.want {
				t.Fatalf("Applies = %v, want %v", ok, tt.want)
			}
			if ok && (len(plan.Keep) != 1 || plan.Keep[0]["id"] != "1" || len(plan.Delete) != 1 || plan.Delete[0]["id"] != "2") {
				t.Errorf("plan keeps %v and deletes %v; want keep id 1, delete id 2", plan.Keep, plan.Delete)
			}
		})
	}
}

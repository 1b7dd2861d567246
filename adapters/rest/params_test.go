package rest

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestParamValuesDoNotReshapeTheRead: a run parameter fills one path
// segment or one query value and nothing else. A value that would climb out
// of its segment is refused before anything is read; a value with '&' and
// '=' stays one query value and selects only records holding exactly it.
func TestParamValuesDoNotReshapeTheRead(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	secrets := map[string]string{"auth.value_env": f.Token()}
	f.Post(t, doctype, encounter("PAT-1", "Triage", "a"))
	f.Post(t, doctype, encounter("PAT-1", "Vitals", "b"))
	odd := f.Post(t, doctype, encounter("PAT-1&limit_page_length=999", "Triage", "c"))

	for _, tt := range []struct{ value, wantMsg string }{
		{"../admin", "path separator"},
		{"p1/../../x", "path separator"},
		{`..\admin`, "path separator"},
		{"..", "names another resource"},
		{"p1\x00", "control character"},
	} {
		t.Run("path "+tt.value, func(t *testing.T) {
			before := f.Requests()
			sec := frappeSection(f, func(s map[string]any) {
				s["records_path"] = "/api/resource/Patient%20Encounter/{patient}"
			})
			err := inProcess(t).Configure(t.Context(), request(t, sec, map[string]string{"patient_id": tt.value}, secrets))
			var ce *refusal.Error
			if !errors.As(err, &ce) || ce.Path != "records_path" || !strings.Contains(ce.Message, tt.wantMsg) || !strings.Contains(ce.Message, "{patient}") {
				t.Fatalf("Configure = %v; want records_path refused naming {patient} and %q", err, tt.wantMsg)
			}
			if n := f.Requests() - before; n != 0 {
				t.Errorf("the refused read still sent %d requests", n)
			}
		})
	}

	t.Run("query value", func(t *testing.T) {
		ip := configured(t, request(t, frappeSection(f, nil), map[string]string{"patient_id": "PAT-1&limit_page_length=999"}, secrets))
		got := mustRead(t, ip, true)
		if !got.Reachable {
			t.Fatalf("unreachable: %s", got.Reason)
		}
		if len(got.Records) != 1 || got.Records[0]["name"] != odd {
			t.Errorf("records %v; want only %s, whose patient is the whole value", got.Records, odd)
		}
	})
}

// TestTemplatePathParams: a path_params template composes literal text
// with a run parameter ("PAT-{pid}"); the parameter is escaped for the
// placeholder's place, so in the query it stays one value ('&' and '='
// included) and in the path it may not leave its segment, while the
// template's own text is kept as written.
func TestTemplatePathParams(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	secrets := map[string]string{"auth.value_env": f.Token()}
	one := f.Post(t, doctype, encounter("PAT-1", "Triage", "a"))
	f.Post(t, doctype, encounter("PAT-2", "Triage", "b"))
	odd := f.Post(t, doctype, encounter("PAT-1&limit_page_length=999", "Triage", "c"))
	templated := func(tmpl string) func(map[string]any) {
		return func(s map[string]any) {
			s["path_params"] = map[string]any{"patient": map[string]any{"template": tmpl}}
		}
	}
	for pid, want := range map[string]string{"1": one, "1&limit_page_length=999": odd} {
		ip := configured(t, request(t, frappeSection(f, templated("PAT-{pid}")), map[string]string{"pid": pid}, secrets))
		got := mustRead(t, ip, true)
		if !got.Reachable || len(got.Records) != 1 || got.Records[0]["name"] != want {
			t.Errorf("pid %q: records %v (%s); want only %s", pid, got.Records, got.Reason, want)
		}
	}
	sec := frappeSection(f, func(s map[string]any) {
		s["records_path"] = "/api/resource/Patient%20Encounter/{patient}"
		templated("enc-{pid}")(s)
	})
	before := f.Requests()
	err := inProcess(t).Configure(t.Context(), request(t, sec, map[string]string{"pid": "../admin"}, secrets))
	ce, ok := errors.AsType[*refusal.Error](err)
	if !ok || ce.Path != "records_path" || !strings.Contains(ce.Message, "{patient}") || !strings.Contains(ce.Message, `run parameter "pid" holds a path separator`) {
		t.Errorf("Configure = %v; want records_path refused naming {patient} and the parameter", err)
	}
	if n := f.Requests() - before; n != 0 {
		t.Errorf("the refused read still sent %d requests", n)
	}
	err = inProcess(t).Configure(t.Context(), request(t, frappeSection(f, templated("PAT-1")), map[string]string{"pid": "1"}, secrets))
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "path_params.patient.template" || !strings.Contains(ce.Message, "names no run parameter") {
		t.Errorf("a template naming no parameter: %v; want a refusal at path_params.patient.template", err)
	}
	err = inProcess(t).Configure(t.Context(), request(t, frappeSection(f, templated("PAT-{pid}")), map[string]string{}, secrets))
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "path_params.patient" || !strings.Contains(ce.Message, `"pid"`) {
		t.Errorf("a template's missing parameter: %v; want a refusal at path_params.patient naming pid", err)
	}
}

// TestPathParamsEscapedAsOneSegment: against the Frappe test server, a
// literal or template entry of path_params standing in the path fills
// exactly one segment, whatever the operator wrote in it: a space and a
// '/' (here in a doctype's name) are percent-escaped inside the segment,
// so the read reaches that doctype's list, not another resource. A space a
// template writes in the query is sent as %20, never raw in the request
// line (a server answers 400 to that). A run parameter's own '/' is still
// refused, before anything is sent.
func TestPathParamsEscapedAsOneSegment(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFrappe(t, true)
	secrets := map[string]string{"auth.value_env": f.Token()}
	const doctype = "Lab Order/Result"
	want := f.Insert(doctype, encounter("PAT-1", "Lab", "a"))
	f.Insert("Lab Order", encounter("PAT-2", "Lab", "b"))
	section := func(entry any) map[string]any {
		return frappeSection(f, func(s map[string]any) {
			s["records_path"] = `/api/resource/{doctype}?fields=["name","patient"]&limit_page_length=0`
			s["path_params"] = map[string]any{"doctype": entry}
		})
	}
	for name, entry := range map[string]any{
		"literal":  doctype,
		"template": map[string]any{"template": "Lab {kind}/Result"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ip := configured(t, request(t, section(entry), map[string]string{"kind": "Order"}, secrets))
			got := mustRead(t, ip, true)
			if !got.Reachable || len(got.Records) != 1 || got.Records[0]["name"] != want {
				t.Errorf("records %v (%s); want only %s of %q", got.Records, got.Reason, want, doctype)
			}
		})
	}
	// Not parallel (nor is the next): it runs, with its own doctype, before
	// the subtests above resume, so their reads and request counts are
	// their own.
	t.Run("template with a space in the query", func(t *testing.T) {
		const other = "Lab Visit"
		spaced := f.Insert(other, encounter("PAT 7", "Lab", "c"))
		f.Insert(other, encounter("PAT 8", "Lab", "d"))
		sec := section(other)
		sec["records_path"] = `/api/resource/{doctype}?fields=["name","patient"]&filters=[["patient","=","{patient}"]]&limit_page_length=0`
		sec["path_params"] = map[string]any{"doctype": other, "patient": map[string]any{"template": "PAT {n}"}}
		got := mustRead(t, configured(t, request(t, sec, map[string]string{"n": "7"}, secrets)), true)
		if !got.Reachable || len(got.Records) != 1 || got.Records[0]["name"] != spaced {
			t.Errorf("records %v (%s); want only %s, whose patient is %q", got.Records, got.Reason, spaced, "PAT 7")
		}
	})
	t.Run("run parameter holding a slash", func(t *testing.T) {
		before := f.Requests() // not parallel: no other subtest reads meanwhile
		err := inProcess(t).Configure(t.Context(), request(t, section(map[string]any{"param": "dt"}), map[string]string{"dt": doctype}, secrets))
		if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "records_path" || !strings.Contains(ce.Message, "path separator") {
			t.Errorf("Configure = %v; want records_path refused for the path separator", err)
		}
		if n := f.Requests() - before; n != 0 {
			t.Errorf("the refused read sent %d requests", n)
		}
	})
}

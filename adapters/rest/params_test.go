package rest

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk"
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
			var ce *sdk.ConfigError
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

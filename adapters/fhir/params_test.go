package fhir

import (
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// TestParamValueIsOneSearchValue: a run parameter with '&' and '=' reaches
// the server as one search value, selecting only the resource that holds
// exactly it; it cannot add search parameters of its own.
func TestParamValueIsOneSearchValue(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T10:00:00Z", "185"))
	odd := f.Create(t, "Observation", httprecords.Observation("Patient/a&_count=999", "final", "2026-01-01T10:00:00Z", "80"))
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), request(t, section(f, nil), map[string]string{"patient_ref": "Patient/a&_count=999"}, map[string]string{"access_token_env": f.Token})); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	got := mustRead(t, ip, true)
	if !got.Reachable {
		t.Fatalf("unreachable: %s", got.Reason)
	}
	if len(got.Records) != 1 || got.Records[0]["id"] != odd {
		t.Errorf("records %v; want only %s, whose subject is the whole value", got.Records, odd)
	}
}

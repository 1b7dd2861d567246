package fhir

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk/refusal"
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

// TestTemplateSearchValue: a search_param_exprs template composes literal
// text with run parameters ("Patient/{pid}"), so the run passes the bare
// id; the bound value selects only that patient's resources. A parameter
// of a template is held to the same place rules as a bare {param}: a
// comma (FHIR OR) or a control character is refused at its path; a
// template that names no parameter is refused at Configure.
func TestTemplateSearchValue(t *testing.T) {
	t.Parallel()
	f := httprecords.NewFHIR(t, true)
	mine := f.Create(t, "Observation", httprecords.Observation("Patient/example", "final", "2026-01-01T10:00:00Z", "185"))
	f.Create(t, "Observation", httprecords.Observation("Patient/other", "final", "2026-01-01T10:00:00Z", "80"))
	templated := func(tmpl string) func(map[string]any) {
		return func(s map[string]any) {
			s["search_param_exprs"] = map[string]any{"patient": map[string]any{"template": tmpl}}
		}
	}
	secrets := map[string]string{"access_token_env": f.Token}
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), request(t, section(f, templated("Patient/{pid}")), map[string]string{"pid": "example"}, secrets)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	got := mustRead(t, ip, true)
	if !got.Reachable || len(got.Records) != 1 || got.Records[0]["id"] != mine {
		t.Fatalf("read %v (%s); want only %s, the observation of Patient/example", got.Records, got.Reason, mine)
	}
	for name, tc := range map[string]struct {
		tmpl     string
		params   map[string]string
		path, in string
	}{
		"comma in a template's parameter": {"Patient/{pid}", map[string]string{"pid": "example,other"}, "search_param_exprs.patient", `run parameter "pid" holds a comma`},
		"control character":               {"Patient/{pid}", map[string]string{"pid": "example\n"}, "search_param_exprs.patient", "control character"},
		"missing parameter":               {"Patient/{pid}", map[string]string{}, "search_param_exprs.patient", `the run has no parameter "pid"`},
		"names no parameter":              {"Patient/example", map[string]string{"pid": "example"}, "search_param_exprs.patient.template", "names no run parameter"},
		"unbalanced braces":               {"Patient/{pid", map[string]string{"pid": "example"}, "search_param_exprs.patient.template", "brace"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), request(t, section(f, templated(tc.tmpl)), tc.params, secrets))
			ce, ok := errors.AsType[*refusal.Error](err)
			if !ok || ce.Path != tc.path || !strings.Contains(ce.Message, tc.in) {
				t.Errorf("Configure = %v; want a refusal at %s containing %q", err, tc.path, tc.in)
			}
		})
	}
}

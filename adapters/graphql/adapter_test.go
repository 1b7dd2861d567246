package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-graphql, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/graphql", "graphql", &pluginBinary)
}

const encountersQuery = `query Encounters($patient: String!) {
  encounters(patientId: $patient) { id patientId type note updatedAt }
}`

func section(g *httprecords.GraphQL, edit func(map[string]any)) map[string]any {
	sec := map[string]any{
		"kind":              "graphql",
		"base_url":          g.URL,
		"graphql_query":     encountersQuery,
		"graphql_variables": map[string]any{"patient": map[string]any{"param": "patient_id"}},
		"auth":              map[string]any{"bearer_env": "GQL_TOKEN"},
		"ca_file":           g.CAFile,
		// The test server answers every encounter of a patient at once
		// unless PageCap is set.
		"single_response": true,
	}
	if edit != nil {
		edit(sec)
	}
	if _, paged := sec["pagination"]; paged {
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

func configured(t testing.TB, g *httprecords.GraphQL, edit func(map[string]any), params map[string]string) *httprecords.Process {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), request(t, section(g, edit), params, map[string]string{"auth.bearer_env": g.Token})); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// read captures once and collects the whole read; an incomplete read fails
// the test.
func read(t testing.TB, c *httprecords.Process, after bool, timeout time.Duration) httprecords.Read {
	t.Helper()
	r, err := httprecords.Capture(t, c, after, timeout, "id")
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	return r
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	tests := []struct {
		name     string
		edit     func(map[string]any)
		params   map[string]string
		wantPath string
		wantMsg  string
	}{
		{"mutation", func(s map[string]any) {
			s["graphql_query"] = `mutation { addEncounter(patientId: "p", type: "Triage") { id } }`
			delete(s, "graphql_variables")
		}, nil, "graphql_query", "refused: the anonymous mutation is a mutation"},
		{"named mutation next to nothing else", func(s map[string]any) {
			s["graphql_query"] = `mutation Sneaky($p: String!) { addEncounter(patientId: $p, type: "Triage") { id } }`
		}, nil, "graphql_query", `refused: operation "Sneaky" is a mutation`},
		{"query and mutation", func(s map[string]any) {
			s["graphql_query"] = encountersQuery + "\nmutation M { addEncounter(patientId: \"p\", type: \"x\") { id } }"
		}, nil, "graphql_query", "is a mutation"},
		{"subscription", func(s map[string]any) {
			s["graphql_query"] = `subscription { encounterAdded { id } }`
			delete(s, "graphql_variables")
		}, nil, "graphql_query", "is a subscription"},
		{"two queries", func(s map[string]any) {
			s["graphql_query"] = encountersQuery + "\nquery Other { encounter(id: \"1\") { id } }"
		}, nil, "graphql_query", "holds 2 operations"},
		{"only a fragment", func(s map[string]any) {
			s["graphql_query"] = `fragment F on Encounter { id }`
		}, nil, "graphql_query", "holds no operation"},
		{"syntax error", func(s map[string]any) { s["graphql_query"] = `query { encounters(patientId: "p") { id }` }, nil, "graphql_query", "is not a GraphQL document"},
		{"empty query", func(s map[string]any) { s["graphql_query"] = "  " }, nil, "graphql_query", "missing"},
		{"undeclared variable", func(s map[string]any) {
			s["graphql_variables"] = map[string]any{"patient": "p", "other": "x"}
		}, nil, "graphql_variables.other", "declares no $other"},
		{"required variable unbound", func(s map[string]any) { delete(s, "graphql_variables") }, nil, "graphql_variables", "requires $patient (String!)"},
		{"Int variable bound to text", func(s map[string]any) {
			s["graphql_query"] = `query Q($n: Int!) { encounter(id: "1") { id } }`
			s["graphql_variables"] = map[string]any{"n": "ten"}
		}, nil, "graphql_variables.n", "not a 32-bit integer"},
		{"Int variable with a plus sign", func(s map[string]any) {
			s["graphql_query"] = `query Q($n: Int!) { encounter(id: "1") { id } }`
			s["graphql_variables"] = map[string]any{"n": "+1"}
		}, nil, "graphql_variables.n", "not written as JSON writes a number"},
		{"Float variable without an integer part", func(s map[string]any) {
			s["graphql_query"] = `query Q($x: Float!) { encounter(id: "1") { id } }`
			s["graphql_variables"] = map[string]any{"x": ".5"}
		}, nil, "graphql_variables.x", "not a decimal number as JSON writes one"},
		{"Float variable in hex", func(s map[string]any) {
			s["graphql_query"] = `query Q($x: Float!) { encounter(id: "1") { id } }`
			s["graphql_variables"] = map[string]any{"x": "0x1p-2"}
		}, nil, "graphql_variables.x", "not a decimal number"},
		{"list variable", func(s map[string]any) {
			s["graphql_query"] = `query Q($ids: [ID!]) { encounter(id: "1") { id } }`
			s["graphql_variables"] = map[string]any{"ids": "1"}
		}, nil, "graphql_variables.ids", "is a list"},
		{"missing run parameter", nil, map[string]string{}, "graphql_variables.patient", `the run has no parameter "patient_id"`},
		{"control character in a variable", nil, map[string]string{"patient_id": "p1\x00"}, "graphql_variables.patient", "control character"},
		{"records path on an unselected field", func(s map[string]any) { s["graphql_records_path"] = "patients" }, nil, "graphql_records_path", `selects no top-level field "patients"`},
		{"several fields without a records path", func(s map[string]any) {
			s["graphql_query"] = `query Q($patient: String!) { encounters(patientId: $patient) { id } patient(id: $patient) { id } }`
		}, nil, "graphql_records_path", "several top-level fields"},
		{"kit freshness keys", func(s map[string]any) {
			s["graphql_freshness_field"] = "updatedAt"
			s["graphql_freshness_window_s"] = 60
		}, nil, "graphql_freshness_field", "write freshness_field and freshness_window_s"},
		{"wrong kind", func(s map[string]any) { s["kind"] = "rest" }, nil, "kind", `reads kind "graphql"`},
		{"unknown key", func(s map[string]any) { s["graphql_querry"] = "x" }, nil, "graphql_querry", "unknown key for kind graphql"},
		{"base_url with a fragment", func(s map[string]any) { s["base_url"] = g.URL + "#x" }, nil, "base_url", "fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := map[string]string{"patient_id": "p-1"}
			if tt.params != nil {
				params = tt.params
			}
			err := inProcess(t).Configure(t.Context(), request(t, section(g, tt.edit), params, map[string]string{"auth.bearer_env": g.Token}))
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q\nwant path %q and a message containing %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
	if g.Requests() != 0 {
		t.Errorf("Configure sent %d requests; it must not connect", g.Requests())
	}
}

// TestRecords reads through the real GraphQL server: variables bound with
// their declared types, a path through a nested object, a null on the way
// (no such patient) as no records, and numbers with their exact text.
func TestRecords(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	g.AddPatient("p-1")
	w := 72.5
	a := g.Insert(httprecords.Encounter{PatientID: "p-1", Type: "Triage", WeightKg: &w, UpdatedAt: "2026-01-01T00:00:00Z"})
	g.Insert(httprecords.Encounter{PatientID: "p-2", Type: "Triage", UpdatedAt: "2026-01-01T00:00:00Z"})
	nested := `query Q($p: String!, $want: Boolean = true) { patient(id: $p) { id encounters @include(if: $want) { id patientId weightKg note } } }`
	tests := []struct {
		name    string
		edit    func(map[string]any)
		patient string
		want    []sdk.Record
	}{
		{"default records path", nil, "p-1", []sdk.Record{{"id": a, "patientId": "p-1", "type": "Triage", "note": nil, "updatedAt": "2026-01-01T00:00:00Z"}}},
		{"nested path, boolean variable", func(s map[string]any) {
			s["graphql_query"] = nested
			s["graphql_variables"] = map[string]any{"p": map[string]any{"param": "patient_id"}, "want": "true"}
			s["graphql_records_path"] = "data.patient.encounters"
		}, "p-1", []sdk.Record{{"id": a, "patientId": "p-1", "weightKg": json.Number("72.5"), "note": nil}}},
		{"null on the way is no records", func(s map[string]any) {
			s["graphql_query"] = nested
			s["graphql_variables"] = map[string]any{"p": map[string]any{"param": "patient_id"}}
			s["graphql_records_path"] = "patient.encounters"
		}, "p-unknown", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := configured(t, g, tt.edit, map[string]string{"patient_id": tt.patient})
			got := read(t, ip, true, 10*time.Second)
			if !got.Reachable {
				t.Fatalf("unreachable: %s", got.Reason)
			}
			if diff := cmp.Diff(tt.want, got.Records); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVerdicts: before read -> the automation writes through the
// mutation -> after read -> the daemon's judge (with the deployment's
// freshness window where the case sets one).
func TestVerdicts(t *testing.T) {
	t.Parallel()
	const written = `{kind: record_written, match: {patientId: {param: patient_id}, type: Triage}, count_new_only: true}`
	const note = `{kind: field_equals, match: {patientId: {param: patient_id}, type: Triage}, field: note, value: Follow-up}`
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name      string
		effect    string
		act       func(t *testing.T, g *httprecords.GraphQL)
		timeout   time.Duration
		freshness string
		want      string
	}{
		{"confirmed", written, func(t *testing.T, g *httprecords.GraphQL) { g.Add(t, "p-1", "Triage", "Follow-up", "") }, 0, "updatedAt=60", "CONFIRMED/confirmed/COUNT_EXACT"},
		{"duplicate", written, func(t *testing.T, g *httprecords.GraphQL) {
			g.Add(t, "p-1", "Triage", "Follow-up", "")
			g.Add(t, "p-1", "Triage", "Follow-up", "")
		}, 0, "", "REFUTED/conflicting/COUNT_OVER"},
		{"wrong subject", written, func(t *testing.T, g *httprecords.GraphQL) { g.Add(t, "p-2", "Triage", "Follow-up", "") }, 0, "", "REFUTED/refuted/COUNT_UNDER"},
		{"partial save", note, func(t *testing.T, g *httprecords.GraphQL) { g.Add(t, "p-1", "Triage", "", "") }, 0, "", "REFUTED/conflicting/FIELD_MISMATCH"},
		{"stale", written, func(t *testing.T, g *httprecords.GraphQL) { g.Add(t, "p-1", "Triage", "Follow-up", old) }, 0, "updatedAt=60", "INDETERMINATE/stale/STALE"},
		{"401 after the action", written, func(t *testing.T, g *httprecords.GraphQL) {
			g.Add(t, "p-1", "Triage", "Follow-up", "")
			g.Rotate()
		}, 0, "", "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"errors in the answer", written, func(t *testing.T, g *httprecords.GraphQL) {
			g.Add(t, "p-1", "Triage", "Follow-up", "")
			g.ReadErrors(true)
		}, 0, "", "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"500 after the action", written, func(t *testing.T, g *httprecords.GraphQL) {
			g.Add(t, "p-1", "Triage", "Follow-up", "")
			g.FailWith(http.StatusInternalServerError)
		}, 0, "", "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
		{"slow past the deadline", written, func(t *testing.T, g *httprecords.GraphQL) {
			g.Add(t, "p-1", "Triage", "Follow-up", "")
			g.SetDelay(5 * time.Second)
		}, 300 * time.Millisecond, "", "INDETERMINATE/unavailable/SOR_UNREACHABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httprecords.NewGraphQL(t, true)
			g.Add(t, "p-1", "Vitals", "earlier", "")
			params := map[string]string{"patient_id": "p-1"}
			ip := configured(t, g, nil, params)
			before := read(t, ip, false, 10*time.Second)
			tt.act(t, g)
			timeout := 10 * time.Second
			if tt.timeout > 0 {
				timeout = tt.timeout
			}
			start := time.Now()
			after := read(t, ip, true, timeout)
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Errorf("the read took %v with a %v deadline", took, timeout)
			}
			if got := httprecords.Judge(t, tt.effect, params, before, after, tt.freshness); got != tt.want {
				t.Errorf("verdict = %s, want %s (after: %+v)", got, tt.want, after)
			}
		})
	}
}

func TestUnreachableReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fault   func(g *httprecords.GraphQL)
		edit    func(map[string]any)
		timeout time.Duration
		want    string
	}{
		{"token refused", func(g *httprecords.GraphQL) { g.Rotate() }, nil, 0, "401 Unauthorized: authentication required"},
		{"resolver error", func(g *httprecords.GraphQL) { g.ReadErrors(true) }, nil, 0, "the GraphQL answer carries errors: encounter store: connection reset by peer"},
		{"server error", func(g *httprecords.GraphQL) { g.FailWith(http.StatusServiceUnavailable) }, nil, 0, "503 Service Unavailable: upstream resolver pool exhausted"},
		{"proxy down", func(g *httprecords.GraphQL) { g.SetDown(true) }, nil, 0, "502 Bad Gateway"},
		{"slow", func(g *httprecords.GraphQL) { g.SetDelay(5 * time.Second) }, nil, 300 * time.Millisecond, "no complete answer before the capture deadline"},
		{"records path missing from the answer", func(g *httprecords.GraphQL) {}, func(s map[string]any) {
			s["graphql_query"] = `query Q($patient: String!) { encounters(patientId: $patient) { id } patient(id: $patient) { id } }`
			s["graphql_records_path"] = "encounters.items"
		}, 0, "the answer has no encounters.items in data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := httprecords.NewGraphQL(t, true)
			g.Add(t, "p-1", "Triage", "", "")
			secret := g.Token
			ip := configured(t, g, tt.edit, map[string]string{"patient_id": "p-1"})
			tt.fault(g)
			timeout := 10 * time.Second
			if tt.timeout > 0 {
				timeout = tt.timeout
			}
			got := read(t, ip, true, timeout)
			if got.Reachable || !strings.Contains(got.Reason, tt.want) {
				t.Errorf("read = reachable %v, reason %q; want unreachable with %q", got.Reachable, got.Reason, tt.want)
			}
			if strings.Contains(got.Reason, secret) {
				t.Errorf("the reason carries the token")
			}
			// The preflight's own deadline must leave the adapter time to
			// answer "unreachable" before the call itself times out: it
			// probes for four fifths of it. At least 3 s here (still below
			// the slow server's 5 s), so that a loaded machine cannot turn
			// that answer into a transport timeout.
			ctx, cancel := context.WithTimeout(t.Context(), max(timeout, 3*time.Second))
			defer cancel()
			if res, err := ip.TestConnection(ctx); err != nil || res.Reachable {
				t.Errorf("TestConnection = %+v, %v; want unreachable and no error", res, err)
			}
		})
	}
}

func TestPluginBinary(t *testing.T) {
	t.Parallel()
	g := httprecords.NewGraphQL(t, true)
	id := g.Add(t, "p-1", "Triage", "x", "")
	proc := adaptertest.Subprocess(t, pluginBinary)
	bin := &httprecords.Process{Instance: proc}
	refused := bin.Configure(t.Context(), request(t, section(g, func(s map[string]any) {
		s["graphql_query"] = `mutation M($patient: String!) { addEncounter(patientId: $patient, type: "Triage") { id } }`
	}), map[string]string{"patient_id": "p-1"}, map[string]string{"auth.bearer_env": g.Token}))
	var ce *refusal.Error
	if !errors.As(refused, &ce) || ce.Path != "graphql_query" || !strings.Contains(ce.Message, "mutation") {
		t.Fatalf("a mutation through the binary: %v; want a refusal at graphql_query", refused)
	}
	if err := bin.Configure(t.Context(), request(t, section(g, nil), map[string]string{"patient_id": "p-1"}, map[string]string{"auth.bearer_env": g.Token})); err != nil {
		t.Fatal(err)
	}
	got := read(t, bin, true, 10*time.Second)
	if !got.Reachable || len(got.Records) != 1 || got.Records[0]["id"] != id {
		t.Errorf("read through the binary: %+v", got)
	}
}

func qualificationHarness(t *testing.T, binary string) adaptertest.Harness {
	g := httprecords.NewGraphQL(t, true)
	config := func(token string) sdk.ConfigureRequest {
		return request(t, section(g, nil), map[string]string{"patient_id": "p-1"}, map[string]string{"auth.bearer_env": token}).Req
	}
	h := adaptertest.Harness{
		Params:           map[string]string{"patient_id": "p-1"},
		Config:           func(t *testing.T) sdk.ConfigureRequest { return config(g.Token) },
		BadCredentials:   func(t *testing.T) sdk.ConfigureRequest { return config("not-the-token") },
		Selector:         map[string]string{"patientId": "p-1", "type": "Triage"},
		Reset:            func(t *testing.T) { g.Reset() },
		WriteCorrect:     func(t *testing.T) string { return g.Add(t, "p-1", "Triage", "Follow-up", "") },
		WriteWrongEntity: func(t *testing.T) string { return g.Add(t, "p-2", "Triage", "Follow-up", "") },
		WriteDuplicate:   func(t *testing.T) string { return g.Add(t, "p-1", "Triage", "Follow-up", "") },
		WriteStale: func(t *testing.T) (string, string) {
			const old = "2001-02-03T04:05:06Z"
			g.Add(t, "p-1", "Triage", "old", old)
			return "updatedAt", old
		},
		WriteLater: func(t *testing.T, d time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(d)
				g.Insert(httprecords.Encounter{PatientID: "p-1", Type: "Triage"})
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, up bool) { g.SetDown(!up) },
		SeedMany: func(t *testing.T, n int) {
			for range n {
				g.Insert(httprecords.Encounter{PatientID: "p-1", Type: "Triage", UpdatedAt: "2026-01-01T00:00:00Z"})
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

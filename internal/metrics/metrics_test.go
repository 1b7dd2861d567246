package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A nil *Metrics records nothing and does not panic: a Manager or host
// built without metrics needs no guard.
func TestNilMetricsRecordsNothing(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.BeginDone("BEGUN", time.Second)
	m.VerifyDone("clinic", "VERIFIED", time.Second)
	m.Verdict("clinic", "sql", "CONFIRMED", "confirmed", 1)
	m.IntegrityError()
	m.Declare([]string{"clinic"}, []string{"sql"})
	m.Captured("sql", "before", 3, 30)
	m.TasksIssued(1)
	m.TasksClosed(1)
	m.PluginStarted("sql")
	m.PluginRestarted("sql")
	m.PluginCrashed("sql")
}

// Names carry the verifierd_ prefix and live on the registry passed in,
// not on the global default.
func TestMetricsLiveOnTheirOwnRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.PluginCrashed("rest")
	m.Captured("rest", "after", 2, 40)
	m.GaugeFunc("store_size_bytes", "size", func() float64 { return 4096 })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`verifierd_plugin_crashes_total{kind="rest"} 1`,
		`verifierd_capture_rows_total{kind="rest",phase="after"} 2`,
		`verifierd_capture_bytes_total{kind="rest",phase="after"} 40`,
		`verifierd_store_size_bytes 4096`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("the scrape lacks %s:\n%s", want, rec.Body.String())
		}
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), Namespace+"_") {
			t.Errorf("%s is on the global registry", f.GetName())
		}
	}
}

// Declare starts the series a dashboard reads at zero; a session of a
// caller's own deployment is labelled inline.
func TestDeclareAndDeploymentLabels(t *testing.T) {
	t.Parallel()
	m := New(prometheus.NewRegistry())
	m.Declare([]string{"clinic"}, []string{"sql", "rest"})
	m.VerifyDone("", "VERIFIED", time.Millisecond)
	m.Verdict("clinic", "sql", "REFUTED", "conflicting", 1)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`verifierd_sessions_verified_total{deployment="clinic",outcome="HALTED_BEFORE_EFFECT"} 0`,
		`verifierd_sessions_verified_total{deployment="inline",outcome="VERIFIED"} 1`,
		`verifierd_plugin_restarts_total{kind="rest"} 0`,
		`verifierd_plugin_crashes_total{kind="sql"} 0`,
		`verifierd_verdicts_total{deployment="clinic",kind="sql",result="conflicting",tier="1",verdict="REFUTED"} 1`,
		`verifierd_store_integrity_errors_total 0`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("the scrape lacks %s:\n%s", want, rec.Body.String())
		}
	}
}

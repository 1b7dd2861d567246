// Package metrics owns the daemon's Prometheus metrics: one registry that
// the daemon creates and passes in (never the global default), the
// verifierd_* collectors, and the /metrics handler on the HTTP listener.
// Every recording method is safe on a nil *Metrics, so that a session
// Manager or plugin host built without metrics (tests, the CLI) needs no
// guard. Labels carry kinds, outcomes, classes and tiers only: never a
// parameter, a record value or a secret.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric name.
const Namespace = "verifierd"

// Metrics are the daemon's collectors on one registry.
type Metrics struct {
	reg *prometheus.Registry

	sessionsBegun    *prometheus.CounterVec
	sessionsVerified *prometheus.CounterVec
	verdicts         *prometheus.CounterVec
	beginSeconds     prometheus.Histogram
	verifySeconds    prometheus.Histogram
	captureRows      *prometheus.CounterVec
	captureBytes     *prometheus.CounterVec
	pluginStarts     *prometheus.CounterVec
	pluginRestarts   *prometheus.CounterVec
	pluginCrashes    *prometheus.CounterVec
	tasksIssued      prometheus.Counter
	tasksClosed      prometheus.Counter
	integrityErrors  prometheus.Counter
}

// latencyBuckets span a quick in-process read (milliseconds) to a slow
// settling system of record (minutes).
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New registers the daemon's collectors on reg.
func New(reg *prometheus.Registry) *Metrics {
	f := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	h := func(name, help string) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: latencyBuckets})
		reg.MustRegister(x)
		return x
	}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	return &Metrics{
		reg:              reg,
		sessionsBegun:    f("sessions_begun_total", "Begin calls by outcome: BEGUN, or the refusal (REJECTED_POLICY, FAILED_PLATFORM, HALTED_BEFORE_EFFECT, INVALID, NOT_FOUND, ERROR).", "outcome"),
		sessionsVerified: f("sessions_verified_total", "Verify calls that judged a session, by registered deployment (inline for a caller's own) and outcome (VERIFIED, RECONCILIATION_REQUIRED, ...; ERROR when the call failed).", "deployment", "outcome"),
		verdicts:         f("verdicts_total", "Effect verdicts by registered deployment, adapter kind, verdict, result class and tier.", "deployment", "kind", "verdict", "result", "tier"),
		beginSeconds:     h("begin_duration_seconds", "Time a Begin call took, refusals included."),
		verifySeconds:    h("verify_duration_seconds", "Time a Verify call that judged a session took."),
		captureRows:      f("capture_rows_total", "Records read from adapters, by kind and phase (before: the baseline; after: the read Verify judges).", "kind", "phase"),
		captureBytes:     f("capture_bytes_total", "Bytes of records (as the adapter encoded them) read from adapters, by kind and phase.", "kind", "phase"),
		pluginStarts:     f("plugin_starts_total", "Adapters started (a process, or an in-process server), by kind, spares included.", "kind"),
		pluginRestarts:   f("plugin_restarts_total", "Adapters relaunched after their process exited, by kind.", "kind"),
		pluginCrashes:    f("plugin_crashes_total", "Adapter processes found exited while in use, by kind.", "kind"),
		tasksIssued:      c("reconciliation_tasks_issued_total", "Reconciliation tasks issued by Verify and Reverify."),
		tasksClosed:      c("reconciliation_tasks_closed_total", "Reconciliation tasks closed or superseded by a re-verification. Open tasks: issued - closed (since the daemon started)."),
		integrityErrors:  c("store_integrity_errors_total", "Verify calls that met a stored value failing its integrity check (answered DataLoss; `verifierd store check` names the value)."),
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// GaugeFunc registers a gauge read when scraped (store size, live
// processes).
func (m *Metrics) GaugeFunc(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, fn))
}

// Register adds a collector of the daemon's own (the listeners'
// connection counts) to the registry.
func (m *Metrics) Register(c prometheus.Collector) {
	m.reg.MustRegister(c)
}

// BeginDone records a finished Begin.
func (m *Metrics) BeginDone(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.sessionsBegun.WithLabelValues(outcome).Inc()
	m.beginSeconds.Observe(d.Seconds())
}

// Inline is the deployment label of a session begun with the caller's own
// deployment.
const Inline = "inline"

func deploymentLabel(name string) string {
	if name == "" {
		return Inline
	}
	return name
}

// VerifyDone records a Verify that judged a session of deployment (or
// failed doing so).
func (m *Metrics) VerifyDone(deployment, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.sessionsVerified.WithLabelValues(deploymentLabel(deployment), outcome).Inc()
	m.verifySeconds.Observe(d.Seconds())
}

// Verdict records one effect's verdict.
func (m *Metrics) Verdict(deployment, kind, verdict, result string, tier int) {
	if m == nil {
		return
	}
	m.verdicts.WithLabelValues(deploymentLabel(deployment), kind, verdict, result, strconv.Itoa(tier)).Inc()
}

// IntegrityError records a Verify that met a damaged stored value.
func (m *Metrics) IntegrityError() {
	if m != nil {
		m.integrityErrors.Inc()
	}
}

// Outcomes are the step outcomes a deployment's series start at zero with.
var Outcomes = []string{"VERIFIED", "RECONCILIATION_REQUIRED", "HALTED_BEFORE_EFFECT"}

// Declare starts at zero the series a dashboard and its alerts read before
// anything happened: each registered deployment's outcomes, and each
// adapter kind's starts, restarts and crashes (so that a rate over them is
// 0, not absent, until the first event).
func (m *Metrics) Declare(deployments, kinds []string) {
	if m == nil {
		return
	}
	for _, d := range deployments {
		for _, o := range Outcomes {
			m.sessionsVerified.WithLabelValues(d, o)
		}
	}
	for _, k := range kinds {
		m.pluginStarts.WithLabelValues(k)
		m.pluginRestarts.WithLabelValues(k)
		m.pluginCrashes.WithLabelValues(k)
	}
	m.sessionsBegun.WithLabelValues("BEGUN")
}

// Captured records rows and bytes read from an adapter.
func (m *Metrics) Captured(kind, phase string, rows, bytes int) {
	if m == nil || rows == 0 {
		return
	}
	m.captureRows.WithLabelValues(kind, phase).Add(float64(rows))
	m.captureBytes.WithLabelValues(kind, phase).Add(float64(bytes))
}

// TasksIssued and TasksClosed count reconciliation tasks.
func (m *Metrics) TasksIssued(n int) {
	if m == nil || n == 0 {
		return
	}
	m.tasksIssued.Add(float64(n))
}

// TasksClosed: see TasksIssued.
func (m *Metrics) TasksClosed(n int) {
	if m == nil || n == 0 {
		return
	}
	m.tasksClosed.Add(float64(n))
}

// PluginStarted, PluginRestarted and PluginCrashed make Metrics a
// pluginhost.Events.
func (m *Metrics) PluginStarted(kind string) {
	if m != nil {
		m.pluginStarts.WithLabelValues(kind).Inc()
	}
}

// PluginRestarted: see PluginStarted.
func (m *Metrics) PluginRestarted(kind string) {
	if m != nil {
		m.pluginRestarts.WithLabelValues(kind).Inc()
	}
}

// PluginCrashed: see PluginStarted.
func (m *Metrics) PluginCrashed(kind string) {
	if m != nil {
		m.pluginCrashes.WithLabelValues(kind).Inc()
	}
}

package main

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/verifierd/verifierd/internal/console"
	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/version"
)

// newMetrics builds the daemon's own registry (never the global default):
// the verifierd_* metrics plus the Go runtime and process collectors.
func newMetrics() *metrics.Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(buildInfo(version.Get()))
	return metrics.New(reg)
}

// buildInfo is the verifierd_build_info gauge: always 1, its labels the
// running build's version, commit and Go toolchain.
func buildInfo(v version.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "build_info",
		Help: "The running build: version (v0.4.0, or devel), VCS revision and Go version; always 1."},
		[]string{"version", "revision", "goversion"})
	g.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	return g
}

// watchDaemon adds the gauges read at scrape time: the store file's size
// (read under ctx, the daemon's lifetime) and the live adapter processes.
func watchDaemon(ctx context.Context, m *metrics.Metrics, st store.Backend, host *pluginhost.Host) {
	m.GaugeFunc("store_size_bytes", "Size of the session store file (verifierd.db).", func() float64 { return float64(st.Size(ctx)) })
	m.GaugeFunc("plugin_processes", "Adapter processes running now (at most one per kind).", func() float64 { return float64(host.LiveProcesses()) })
}

// watchHealth adds the gauges the alert rules read
// (deploy/prometheus/alerts.yaml): whether the store answered its last
// check, whether its key ids are still this daemon's, and the request
// budget's use against its limit.
func watchHealth(m *metrics.Metrics, fence *keyFence, storeUp *atomic.Bool, budget *inflight.Budget) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.GaugeFunc("store_up", "1 while the store answered its last check (--store-check-interval; always 1 for the embedded store), 0 while it does not.", func() float64 { return b2f(storeUp.Load()) })
	m.GaugeFunc("store_keys_mismatched", "1 once the store no longer records this daemon's key ids (another replica rotated them): the daemon refuses every call until restarted with the store's keys.", func() float64 { return b2f(fence.Ready() != nil) })
	if budget != nil {
		m.GaugeFunc("inflight_bytes", "Request bytes held now against --max-inflight-bytes (gRPC and HTTP together).", func() float64 { return float64(budget.InUse()) })
		m.GaugeFunc("inflight_limit_bytes", "The request byte budget, --max-inflight-bytes (0: unbounded).", func() float64 { return float64(budget.Limit()) })
	}
}

// registerObserve joins /metrics and the operator console to the HTTP
// listener, behind its token like every route; the console reads st, the
// Manager's store.
func registerObserve(api *httpapi.API, m *metrics.Metrics, mgr *session.Manager, st store.Backend) {
	api.Handle("GET /metrics", m.Handler().ServeHTTP)
	(&console.Console{Manager: mgr, Store: st, Runs: runs.For(mgr)}).Register(api)
}

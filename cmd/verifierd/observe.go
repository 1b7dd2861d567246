package main

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/verifierd/verifierd/internal/console"
	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
)

// newMetrics builds the daemon's own registry (never the global default):
// the verifierd_* metrics plus the Go runtime and process collectors.
func newMetrics() *metrics.Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return metrics.New(reg)
}

// watchDaemon adds the gauges read at scrape time: the store file's size
// (read under ctx, the daemon's lifetime) and the live adapter processes.
func watchDaemon(ctx context.Context, m *metrics.Metrics, st store.Backend, host *pluginhost.Host) {
	m.GaugeFunc("store_size_bytes", "Size of the session store file (verifierd.db).", func() float64 { return float64(st.Size(ctx)) })
	m.GaugeFunc("plugin_processes", "Adapter processes running now (at most one per kind).", func() float64 { return float64(host.LiveProcesses()) })
}

// registerObserve joins /metrics and the operator console to the HTTP
// listener, behind its token like every route; the console reads st, the
// Manager's store.
func registerObserve(api *httpapi.API, m *metrics.Metrics, mgr *session.Manager, st store.Backend) {
	api.Handle("GET /metrics", m.Handler().ServeHTTP)
	(&console.Console{Manager: mgr, Store: st}).Register(api)
}

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// writeSetCollectors are the write set's collectors (internal/changes),
// registered on the daemon's registry at their first use.
type writeSetCollectors struct {
	changes  *prometheus.CounterVec
	lag      *prometheus.GaugeVec
	retained *prometheus.GaugeVec
}

var writeSetOnce sync.Map // *Metrics -> *writeSetCollectors

func (m *Metrics) writeSet() *writeSetCollectors {
	if c, ok := writeSetOnce.Load(m); ok {
		if w, ok := c.(*writeSetCollectors); ok {
			return w
		}
	}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, []string{"slot"})
	}
	c := &writeSetCollectors{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "write_set_changes_total",
			Help: "Committed row changes read from a change-log slot for Verify polls, by slot."}, []string{"slot"}),
		lag:      g("write_set_slot_lag_bytes", "Bytes of log between a change-log slot's confirmed position and the server's current position, after the last Verify."),
		retained: g("write_set_slot_retained_bytes", "Bytes of log a change-log slot keeps on the server's disk (current position - restart position), after the last Verify."),
	}
	if prev, loaded := writeSetOnce.LoadOrStore(m, c); loaded {
		if w, ok := prev.(*writeSetCollectors); ok {
			return w
		}
	}
	m.reg.MustRegister(c.changes, c.lag, c.retained)
	return c
}

// WriteSetRead counts the changes one write-set read of slot held.
func (m *Metrics) WriteSetRead(slot string, changes int) {
	if m == nil {
		return
	}
	m.writeSet().changes.WithLabelValues(slot).Add(float64(changes))
}

// WriteSetSlot records slot's lag and retained log in bytes.
func (m *Metrics) WriteSetSlot(slot string, lagBytes, retainedBytes int64) {
	if m == nil {
		return
	}
	c := m.writeSet()
	c.lag.WithLabelValues(slot).Set(float64(lagBytes))
	c.retained.WithLabelValues(slot).Set(float64(retainedBytes))
}

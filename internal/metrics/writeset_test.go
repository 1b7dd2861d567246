package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The write set's collectors register on the daemon's registry at their
// first use, once, and are safe on a nil *Metrics.
func TestWriteSetMetrics(t *testing.T) {
	t.Parallel()
	var none *Metrics
	none.WriteSetRead("verifierd_x", 3)
	none.WriteSetSlot("verifierd_x", 1, 2)
	m := New(prometheus.NewRegistry())
	m.WriteSetRead("verifierd_clinic", 10)
	m.WriteSetRead("verifierd_clinic", 2)
	m.WriteSetSlot("verifierd_clinic", 4096, 16384)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`verifierd_write_set_changes_total{slot="verifierd_clinic"} 12`,
		`verifierd_write_set_slot_lag_bytes{slot="verifierd_clinic"} 4096`,
		`verifierd_write_set_slot_retained_bytes{slot="verifierd_clinic"} 16384`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, rec.Body.String())
		}
	}
}

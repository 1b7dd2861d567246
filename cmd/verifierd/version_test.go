package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/version"
)

// TestBuildInfoMetric: /metrics carries verifierd_build_info with the
// running build's version, always 1.
func TestBuildInfoMetric(t *testing.T) {
	m := newMetrics()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	v := version.Get()
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "verifierd_build_info{") {
			if !strings.Contains(line, `version="`+v.Version+`"`) || !strings.Contains(line, `goversion="`+v.GoVersion+`"`) || !strings.HasSuffix(strings.TrimSpace(line), " 1") {
				t.Fatalf("build_info line %q, want version %q, goversion %q, value 1", line, v.Version, v.GoVersion)
			}
			return
		}
	}
	t.Fatalf("no verifierd_build_info in:\n%s", rec.Body.String())
}

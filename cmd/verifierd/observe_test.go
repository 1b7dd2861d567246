package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store/bolt"
)

// The daemon's wiring: /metrics and the console join the HTTP listener
// behind its token, with the gauges read at scrape time.
func TestObserveRoutesBehindTheToken(t *testing.T) {
	t.Parallel()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	mets := newMetrics()
	watchDaemon(t.Context(), mets, st, host)
	api := httpapi.New("tok")
	mgr, err := session.New(session.Options{Host: host, Store: st, Metrics: mets})
	if err != nil {
		t.Fatal(err)
	}
	registerObserve(api, mets, mgr, st)
	srv := httptest.NewServer(api)
	defer srv.Close()

	get := func(path, token string) (int, string) {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/metrics", "/console/", "/console/reconciliation"} {
		if code, _ := get(p, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, code)
		}
		if code, _ := get(p, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p, code)
		}
	}
	code, text := get("/metrics", "tok")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	if !regexp.MustCompile(`(?m)^verifierd_store_size_bytes [1-9]`).MatchString(text) {
		t.Errorf("no positive store size in:\n%s", text)
	}
	for _, want := range []string{"verifierd_plugin_processes 0\n", "go_goroutines "} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code, page := get("/console/", "tok"); code != http.StatusOK || !strings.Contains(page, "No sessions.") {
		t.Errorf("GET /console/: %d\n%s", code, page)
	}
}

package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseHosts(t *testing.T) {
	h, err := ParseHosts(" Verifier.Example , 10.0.0.5:7444,[2001:db8::1],")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"localhost": true, "localhost:7444": true, "LOCALHOST:1": true, "127.0.0.1:7444": true, "127.9.9.9": true, "[::1]:7444": true, "[::1]": true,
		"verifier.example": true, "verifier.example:8443": true, "VERIFIER.EXAMPLE.:80": true,
		"10.0.0.5:7444": true, "10.0.0.5:7445": false, "10.0.0.5": false,
		"[2001:db8::1]:9": true,
		"evil.example":    false, "evil.example:7444": false, "localhost.evil.example": false, "": false, "0.0.0.0:7444": false,
	}
	for host, want := range cases {
		if got := h.Allowed(host); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"http://x.example", "*.example", "x.example/path", "2001:db8::1", "user@x", ":7444"} {
		if _, err := ParseHosts(bad); err == nil || !strings.Contains(err.Error(), "--http-allowed-hosts") {
			t.Errorf("ParseHosts(%q): %v, want an error naming the flag", bad, err)
		}
	}
}

// The browser checks, on a listener without a token (the loopback
// default) and with one.
func TestBrowserChecks(t *testing.T) {
	for _, tok := range []string{"", token} {
		api := New(tok)
		hosts, err := ParseHosts("verifier.example")
		if err != nil {
			t.Fatal(err)
		}
		api.AllowHosts(hosts)
		hit := 0
		api.Handle("POST /v1/x", func(w http.ResponseWriter, _ *http.Request) { hit++; WriteJSON(w, 200, map[string]string{}) })
		api.Handle("GET /v1/x", func(w http.ResponseWriter, _ *http.Request) { hit++; WriteJSON(w, 200, map[string]string{}) })
		srv := httptest.NewServer(api)
		port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
		cases := []struct {
			name, method, host, ctype string
			header                    map[string]string
			auth                      bool
			want                      int
			code                      string
		}{
			{"GET", "GET", "", "", nil, true, 200, ""},
			{"GET localhost", "GET", "localhost:" + port, "", nil, true, 200, ""},
			{"GET listed host", "GET", "verifier.example:" + port, "", nil, true, 200, ""},
			{"GET rebinding host", "GET", "evil.example:" + port, "", nil, false, 421, "misdirected_request"},
			{"health, rebinding host", "GET", "evil.example", "", nil, false, 421, "misdirected_request"},
			{"POST JSON", "POST", "", "application/json", nil, true, 200, ""},
			{"POST JSON charset", "POST", "", "application/json; charset=utf-8", nil, true, 200, ""},
			{"POST text/plain", "POST", "", "text/plain", nil, true, 415, "unsupported_media_type"},
			{"POST form", "POST", "", "application/x-www-form-urlencoded", nil, true, 415, "unsupported_media_type"},
			{"POST no type", "POST", "", "", nil, true, 415, "unsupported_media_type"},
			{"POST same origin", "POST", "", "application/json", map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}, true, 200, ""},
			{"POST listed origin", "POST", "", "application/json", map[string]string{"Origin": "https://verifier.example"}, true, 200, ""},
			{"POST evil origin", "POST", "", "application/json", map[string]string{"Origin": "http://evil.example"}, true, 403, "cross_origin_request"},
			{"POST other loopback port", "POST", "", "application/json", map[string]string{"Origin": "http://127.0.0.1:1"}, true, 403, "cross_origin_request"},
			{"POST null origin", "POST", "", "application/json", map[string]string{"Origin": "null"}, true, 403, "cross_origin_request"},
			{"POST cross-site", "POST", "", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, true, 403, "cross_site_request"},
		}
		if tok != "" {
			cases = append(cases, struct {
				name, method, host, ctype string
				header                    map[string]string
				auth                      bool
				want                      int
				code                      string
			}{"GET any host with the token", "GET", "verifierd.prod.svc:7444", "", nil, true, 200, ""})
		}
		for _, tc := range cases {
			path := "/v1/x"
			if strings.HasPrefix(tc.name, "health") {
				path = "/health"
			}
			req, _ := http.NewRequest(tc.method, srv.URL+path, strings.NewReader("{}"))
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.auth && tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			before := hit
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]string
			_ = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != tc.want || body["error"] != tc.code {
				t.Errorf("token %v, %s: %d %v, want %d %q", tok != "", tc.name, res.StatusCode, body, tc.want, tc.code)
			}
			if reached := hit > before; reached != (tc.want == 200 && path == "/v1/x") {
				t.Errorf("token %v, %s: the handler ran = %v", tok != "", tc.name, reached)
			}
			if res.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" || res.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s: missing the browser headers: %v", tc.name, res.Header)
			}
		}
		srv.Close()
	}
}

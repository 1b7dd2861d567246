package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// httpGet sends one request to the daemon's HTTP listener with the given
// Host header (the listener's own address when empty) and headers, and
// returns the status and body.
func httpDo(t *testing.T, method, addr, host, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// begunTotal is the daemon's count of Begin calls that reached it, every
// outcome summed (verifierd_sessions_begun_total).
func begunTotal(t *testing.T, addr string) int {
	t.Helper()
	code, text := httpDo(t, "GET", addr, "", "/metrics", "", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, text)
	}
	n := 0
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "verifierd_sessions_begun_total") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// TestBrowserStaysOut: the HTTP listener without a token (the loopback
// default) answers only for loopback names and --http-allowed-hosts (a
// rebinding page's Host gets 421, the console included), takes state
// changes only as JSON (415) and only from its own origin (403); and a real
// Chromium, on a page of another origin and on a rebound name, can neither
// read the console nor begin a session.
func TestBrowserStaysOut(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	httpAddr := freeAddr(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr, "--http-allowed-hosts", "verifier.test"}})
	sid := d.begin(t, c, "patient-rebind-1", "note-rebind-1").SessionID
	effects, err := os.ReadFile(c.effects)
	if err != nil {
		t.Fatal(err)
	}
	beginBody, _ := json.Marshal(map[string]any{
		"deploymentName": d.register(t, c.deployment), "effects": string(effects),
		"params": map[string]string{"patient_id": "patient-evil", "note": "planted"},
	})
	if n := begunTotal(t, httpAddr); n != 1 {
		t.Fatalf("begun before the attempts: %d, want 1", n)
	}

	// The console and the API serve the listener's own names and the listed one.
	for _, host := range []string{"", "localhost:" + httpPort, "127.0.0.1:" + httpPort, "verifier.test:" + httpPort, "VERIFIER.TEST"} {
		if code, page := httpDo(t, "GET", httpAddr, host, "/console/", "", nil); code != http.StatusOK || !strings.Contains(page, sid) {
			t.Errorf("GET /console/ with Host %q: %d, want 200 listing %s", host, code, sid)
		}
	}
	// A rebinding page's Host is answered nothing.
	for _, host := range []string{"evil.example", "evil.example:" + httpPort, "verifier.test.evil.example:" + httpPort, "127.0.0.1.evil.example"} {
		for _, p := range []string{"/console/", "/console/sessions/" + sid, "/v1/info", "/v1/sessions/" + sid, "/metrics", "/openapi.json", "/health"} {
			code, body := httpDo(t, "GET", httpAddr, host, p, "", nil)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, sid) || !strings.Contains(body, "--http-allowed-hosts") {
				t.Errorf("GET %s with Host %q: %d %.200s, want 421 naming --http-allowed-hosts", p, host, code, body)
			}
		}
		if code, body := httpDo(t, "POST", httpAddr, host, "/v1/sessions", string(beginBody), map[string]string{"Content-Type": "application/json"}); code != http.StatusMisdirectedRequest {
			t.Errorf("POST /v1/sessions with Host %q: %d %.200s, want 421", host, code, body)
		}
	}
	// State changes: JSON only, from the listener's own origin only.
	refusals := []struct {
		name   string
		path   string
		header map[string]string
		want   int
	}{
		{"text/plain", "/v1/sessions", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"text/plain;charset", "/v1/sessions", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, http.StatusUnsupportedMediaType},
		{"form", "/v1/sessions", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"multipart", "/v1/sessions", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusUnsupportedMediaType},
		{"no type", "/v1/sessions", nil, http.StatusUnsupportedMediaType},
		{"episode as text/plain", "/v1/episodes", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"verify as text/plain", "/v1/sessions/" + sid + ":verify", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"evil origin", "/v1/sessions", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"evil origin, text/plain", "/v1/sessions", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"another loopback port", "/v1/sessions", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
		{"null origin", "/v1/sessions", map[string]string{"Content-Type": "application/json", "Origin": "null"}, http.StatusForbidden},
		{"cross-site", "/v1/sessions", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	}
	for _, r := range refusals {
		body := string(beginBody)
		if !strings.HasPrefix(r.path, "/v1/sessions") {
			body = `{"episode_id": "episode-evil", "oracle_identity": {"patient_id": "p"}}`
		} else if strings.HasSuffix(r.path, ":verify") {
			body = "{}"
		}
		code, text := httpDo(t, "POST", httpAddr, "", r.path, body, r.header)
		if code != r.want {
			t.Errorf("%s: POST %s: %d %.300s, want %d", r.name, r.path, code, text, r.want)
		}
	}
	if n := begunTotal(t, httpAddr); n != 1 {
		t.Fatalf("begun after the refused requests: %d, want 1 (a refused request began a session)", n)
	}
	// The listener's own origin, and a plain client, still begin.
	if code, text := httpDo(t, "POST", httpAddr, "", "/v1/sessions", string(beginBody), map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": "http://" + httpAddr, "Sec-Fetch-Site": "same-origin"}); code != http.StatusOK {
		t.Fatalf("a same-origin JSON Begin: %d %s", code, text)
	}
	if n := begunTotal(t, httpAddr); n != 2 {
		t.Fatalf("begun after the same-origin Begin: %d, want 2", n)
	}

	// A real Chromium: a page of another origin, and a page on a name
	// rebound to 127.0.0.1.
	exe := ""
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("no Chromium; run scripts/deps.sh")
	}
	evilLis, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>evil</title><h1>evil</h1>")
	})}
	go evil.Serve(evilLis)
	t.Cleanup(func() { evil.Close() })
	_, evilPort, _ := net.SplitHostPort(evilLis.Addr().String())

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		// evil.example resolves to this machine, as a rebinding DNS answer would.
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1, MAP attacker.example 127.0.0.2"),
		chromedp.Flag("disable-features", "HttpsUpgrades"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	// The page tries every way a script has: read the console (cors and
	// no-cors), POST a Begin as text/plain and as a form (simple requests
	// the browser sends without asking), and as JSON (which needs a CORS
	// preflight first). It reports what it could see.
	attack := func(daemon string) map[string]string {
		t.Helper()
		body, _ := json.Marshal(string(beginBody))
		script := `(async (daemon, body) => {
			const out = {};
			const note = async (name, f) => { try { out[name] = await f(); } catch (e) { out[name] = "error: " + e; } };
			await note("console", async () => { const r = await fetch(daemon + "/console/"); return r.status + " " + await r.text(); });
			await note("console-no-cors", async () => { const r = await fetch(daemon + "/console/", {mode: "no-cors"}); return r.type + " " + r.status + " " + await r.text(); });
			await note("info", async () => { const r = await fetch(daemon + "/v1/info"); return r.status + " " + await r.text(); });
			await note("plain", async () => { const r = await fetch(daemon + "/v1/sessions", {method: "POST", headers: {"Content-Type": "text/plain"}, body}); return r.status + " " + await r.text(); });
			await note("plain-no-cors", async () => { const r = await fetch(daemon + "/v1/sessions", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body}); return r.type; });
			await note("form-no-cors", async () => { const r = await fetch(daemon + "/v1/sessions", {method: "POST", mode: "no-cors", body: new URLSearchParams({x: body})}); return r.type; });
			await note("json", async () => { const r = await fetch(daemon + "/v1/sessions", {method: "POST", headers: {"Content-Type": "application/json"}, body}); return r.status + " " + await r.text(); });
			return JSON.stringify(out);
		})(` + strconv.Quote(daemon) + `, ` + string(body) + `)`
		res, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("the page's script: %v", err)
		}
		out := map[string]string{}
		if err := json.Unmarshal([]byte(res), &out); err != nil {
			t.Fatalf("the page's report %q: %v", res, err)
		}
		t.Logf("from %s: %v", daemon, out)
		return out
	}

	// 1. A page of another origin (the attacker's site on 127.0.0.2)
	// calling the daemon by its loopback address.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://attacker.example:"+evilPort+"/"), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	out := attack("http://127.0.0.1:" + httpPort)
	for k, v := range out {
		if strings.Contains(v, sid) || strings.Contains(v, "patient-rebind-1") || strings.Contains(v, `"outcome"`) || strings.Contains(v, "keyId") {
			t.Errorf("cross-origin %s: the page read the daemon's data: %.300s", k, v)
		}
	}
	// The JSON POST never left the browser (its preflight was not
	// approved): fetch failed.
	if !strings.HasPrefix(out["json"], "error:") {
		t.Errorf("cross-origin JSON POST: %q, want a failed fetch (preflight refused)", out["json"])
	}
	if n := begunTotal(t, httpAddr); n != 2 {
		t.Fatalf("begun after the cross-origin page's attempts: %d, want 2 (the page began a session)", n)
	}

	// 2. A page whose own name rebinds to 127.0.0.1: same-origin to the
	// browser, so it could read whatever the listener answers for that name.
	rebound := "http://evil.example:" + httpPort
	if err := chromedp.Do(ctx, chromedp.Navigate(rebound+"/")); err != nil {
		t.Fatal(err)
	}
	out = attack(rebound)
	for k, v := range out {
		if strings.Contains(v, sid) || strings.Contains(v, "patient-rebind-1") || strings.Contains(v, "keyId") {
			t.Errorf("rebound %s: the page read the daemon's data: %.300s", k, v)
		}
	}
	for _, k := range []string{"console", "info", "plain", "json"} {
		if !strings.HasPrefix(out[k], "421 ") {
			t.Errorf("rebound %s: %.200q, want 421", k, out[k])
		}
	}
	if n := begunTotal(t, httpAddr); n != 2 {
		t.Fatalf("begun after the browser's attempts: %d, want 2 (a page began a session)", n)
	}
	// The console in the operator's own browser tab still works.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://127.0.0.1:"+httpPort+"/console/"), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil || !strings.Contains(html, sid) {
		t.Errorf("the operator's console tab lacks session %s: %v", sid, err)
	}
}

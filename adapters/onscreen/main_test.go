package onscreen

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// cdpURL is the DevTools address of the Chromium the tests drive as the
// automation would; the adapter reads its screen.
var cdpURL string

// pluginBinary is verifier-adapter-onscreen, built once by TestMain.
var pluginBinary string

// chromiumPaths are where Debian's chromium puts the browser.
var chromiumPaths = []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser"}

func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := modelPath(); err != nil {
		fmt.Fprintln(os.Stderr, err, "(run scripts/deps.sh)")
		os.Exit(1)
	}
	path, cleanup, err := adaptertest.BuildPlugin("github.com/verifierd/verifierd/cmd/plugins/onscreen", Kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginBinary = path
	stop, url, err := startChromium()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		cleanup()
		os.Exit(1)
	}
	cdpURL = url
	code := m.Run()
	stop()
	cleanup()
	os.Exit(code)
}

// startChromium starts a headless Chromium with the DevTools protocol on a
// free loopback port, as an automation's browser would run.
func startChromium() (func(), string, error) {
	var bin string
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return nil, "", fmt.Errorf("no Chromium (looked for %s); run scripts/deps.sh", strings.Join(chromiumPaths, ", "))
	}
	dir, err := os.MkdirTemp("", "onscreen-test-chromium-")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "--window-size=1024,768", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--no-first-run", "--no-default-browser-check", "about:blank")
	cmd.Env = []string{"HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				found <- strings.TrimSpace(after)
			}
		}
	}()
	select {
	case ws := <-found:
		// ws://127.0.0.1:PORT/devtools/browser/ID: the adapter is given
		// the http:// address, as an operator would write it.
		rest := strings.TrimPrefix(ws, "ws://")
		host, _, _ := strings.Cut(rest, "/")
		return stop, "http://" + host, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, "", fmt.Errorf("chromium did not print its DevTools address")
	}
}

// app is a running screen application and the automation's tab on it.
type app struct {
	*screenapp.Server
	tab context.Context
}

func startApp(t testing.TB) *app {
	t.Helper()
	s, err := screenapp.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	alloc, cancelAlloc := remote.NewAllocator(context.Background(), cdpURL)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if _, err := chromedp.Run(tab, chromedp.Navigate(s.URL+"/new")); err != nil {
		t.Fatal(err)
	}
	return &app{Server: s, tab: tab}
}

// fill types a record into the form and saves it, as the automation does,
// and waits for the confirmation screen.
func (a *app) fill(t testing.TB, rec screenapp.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(a.tab, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(a.URL+"/new?font="+rec.Font)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec)
	js := `(function (r) {
		document.getElementById("ref").value = r.ref;
		document.getElementById("in-name").value = r.name;
		document.getElementById("in-born").value = r.born;
		document.getElementById("in-amount").value = r.amount;
		document.getElementById("save").click();
		return true;
	})(` + string(b) + `)`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatal(err)
	}
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("record") !== null`))
		if err == nil && ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the confirmation screen never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// show paints values on the automation's tab without saving (the /show page).
func (a *app) show(t testing.TB, rec screenapp.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(a.tab, 20*time.Second)
	defer cancel()
	q := fmt.Sprintf("/show?ref=%s&name=%s&born=%s&amount=%s&font=%s", urlq(rec.Ref), urlq(rec.Name), urlq(rec.Born), urlq(rec.Amount), urlq(rec.Font))
	if _, err := chromedp.Run(ctx, chromedp.Navigate(a.URL+q)); err != nil {
		t.Fatal(err)
	}
}

func urlq(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "?", "%3F")
	return r.Replace(s)
}

func region(name string) []int {
	r := screenapp.Fields[name]
	return r[:]
}

// reopenSection is a tier-3 section for the app: open the record page by
// the run's reference, wait for it, read name and born by OCR and amount
// from the page structure.
func (a *app) reopenSection() map[string]any {
	return map[string]any{
		"kind": Kind,
		"onscreen": map[string]any{
			"screen": map[string]any{"cdp_url": cdpURL, "page_url_prefix": a.URL + "/"},
			"renavigate": []any{
				map[string]any{"open": a.URL + "/records/{ref}"},
				map[string]any{"wait": map[string]any{"selector": "#record"}},
			},
			"absent_selector": "#not-found",
			"fields": []any{
				map[string]any{"param": "name", "region": region("name")},
				map[string]any{"param": "born", "region": region("born")},
				map[string]any{"param": "amount", "selector": "#amount"},
			},
			"navigation_timeout_s": 10,
		},
	}
}

// sameSurfaceSection is the tier-4 section: the fields of the screen the
// save left.
func (a *app) sameSurfaceSection() map[string]any {
	return map[string]any{
		"kind": Kind,
		"onscreen": map[string]any{
			"screen":       map[string]any{"cdp_url": cdpURL, "page_url_prefix": a.URL + "/"},
			"same_surface": true,
			"fields": []any{
				map[string]any{"param": "name", "region": region("name")},
				map[string]any{"param": "born", "region": region("born")},
				map[string]any{"param": "amount", "region": region("amount")},
			},
		},
	}
}

func inner(sec map[string]any) map[string]any { return sec["onscreen"].(map[string]any) }

func params(rec screenapp.Record) map[string]string {
	return map[string]string{"ref": rec.Ref, "name": rec.Name, "born": rec.Born, "amount": rec.Amount}
}

func request(t testing.TB, sec map[string]any, p map[string]string) setup {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	return setup{ConfigureRequest: sdk.ConfigureRequest{Kind: Kind, Config: raw}, Params: p}
}

// setup is a ConfigureRequest and the run parameters every call carries.
type setup struct {
	sdk.ConfigureRequest
	Params map[string]string
}

// client runs the adapter in process behind the SDK's plugin client.
func client(t testing.TB, req setup) *adaptertest.Instance {
	t.Helper()
	ip := adaptertest.InProcess(t, New)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ip.Setup(ctx, req.ConfigureRequest, req.Params); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// captured is one capture's outcome.
type captured struct {
	Reachable bool
	Reason    string
	Records   []sdk.Record
}

func capture(t testing.TB, c *adaptertest.Instance, after bool) captured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := sdk.CaptureRequest{CaptureID: "test", IdentityField: "id", Timeout: 30 * time.Second, EffectKind: "record_written"}
	call := c.CaptureBefore
	if after {
		call = c.CaptureAfter
	}
	capt, err := call(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatal(err)
	}
	return captured{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}
}

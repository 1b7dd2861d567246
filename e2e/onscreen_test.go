package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

// The screen application paints a record's fields here (CSS pixels:
// x, y, width, height); internal/testservers/screenapp.Fields.
var screenNameRegion = []int{40, 120, 560, 44}

var onscreenBuild struct {
	once sync.Once
	err  error
}

// buildOnScreen builds the onscreen plugin beside verifierd (the daemon
// finds built-in adapters there) and the test's screen application.
func buildOnScreen(t *testing.T) {
	t.Helper()
	onscreenBuild.once.Do(func() {
		for _, b := range [][2]string{
			{filepath.Join(bins.dir, "verifier-adapter-onscreen"), "../cmd/plugins/onscreen"},
			{filepath.Join(bins.dir, "screenapp"), "../internal/testservers/screenapp/cmd/screenapp"},
		} {
			if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
				onscreenBuild.err = fmt.Errorf("building %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if onscreenBuild.err != nil {
		t.Fatal(onscreenBuild.err)
	}
}

// startProcess runs a test server that prints "<name> listening on ADDR"
// and returns ADDR.
func startProcess(t *testing.T, prefix string, cmd *exec.Cmd, fromStderr bool) string {
	t.Helper()
	var pipe interface{ Read([]byte) (int, error) }
	var err error
	if fromStderr {
		pipe, err = cmd.StderrPipe()
	} else {
		pipe, err = cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
	}
	if err != nil {
		t.Fatal(err)
	}
	// Its own process group: a browser's helper processes are stopped
	// with it, not left writing into its profile.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-pgid, 0) == nil; {
			if time.Now().After(deadline) {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), prefix); ok {
				select {
				case found <- strings.TrimSpace(after):
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		return addr
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not print %q", cmd.Path, prefix)
	}
	return ""
}

// automationBrowser starts a headless Chromium with the DevTools protocol on
// loopback, as the automation's browser runs, and returns its http://
// DevTools address.
func automationBrowser(t *testing.T) string {
	t.Helper()
	var bin string
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("no Chromium; run scripts/deps.sh")
	}
	// Not t.TempDir: the profile is removed after the browser's whole
	// process group is gone (cleanups run last-registered first), and
	// removal is retried while a helper's last write lands.
	dir, err := os.MkdirTemp("", "e2e-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("the browser profile %s could not be removed", dir)
	})
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "--window-size=1024,768", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--no-first-run", "about:blank")
	cmd.Env = []string{"HOME=" + dir}
	ws := startProcess(t, "DevTools listening on ", cmd, true)
	rest := strings.TrimPrefix(ws, "ws://")
	host, _, _ := strings.Cut(rest, "/")
	return "http://" + host
}

// screenRecord is what the automation types.
type screenRecord struct {
	Ref    string `json:"ref"`
	Name   string `json:"name"`
	Born   string `json:"born"`
	Amount string `json:"amount"`
}

// automationSave types rec into the screen application's form in the
// automation's browser and saves, and waits for the confirmation screen.
func automationSave(t *testing.T, tab context.Context, appURL string, rec screenRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(appURL+"/new")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function (r) {
		document.getElementById("ref").value = r.ref;
		document.getElementById("in-name").value = r.name;
		document.getElementById("in-born").value = r.born;
		document.getElementById("in-amount").value = r.amount;
		document.getElementById("save").click();
		return true;
	})(`+string(b)+`)`)); err != nil {
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

// TestOnScreenCandidates: through the real daemon and the real
// verifier-adapter-onscreen reading a real Chromium with Tesseract. With
// candidates [document, onscreen] the daemon selects the document (tier 1);
// with the onscreen candidate alone it reads the screen: tier 3 when it
// re-opens the record, tier 4 on the save's own screen, each CONFIRMED
// carrying SCREEN_CONSISTENCY_ONLY.
func TestOnScreenCandidates(t *testing.T) {
	buildOnScreen(t)
	cdp := automationBrowser(t)
	appURL := startProcess(t, "screenapp listening on ", exec.Command(filepath.Join(bins.dir, "screenapp")), false)
	alloc, cancelAlloc := remote.NewAllocator(context.Background(), cdp)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if _, err := chromedp.Run(tab, chromedp.Navigate(appURL+"/new")); err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	exports := filepath.Join(dir, "exports")
	if err := os.Mkdir(exports, 0o755); err != nil {
		t.Fatal(err)
	}
	region, _ := json.Marshal(screenNameRegion)
	documentSection := fmt.Sprintf(`    - kind: document
      root: %s
      file_pattern: "record-*.json"
      document_format: json
      document_field_paths: {holder: holder, amount: amount}
`, exports)
	reopenSection := fmt.Sprintf(`    - kind: onscreen
      newness: newly_matching   # the run's one record, re-opened: newly matching it
      onscreen:
        screen: {cdp_url: %q, page_url_prefix: %q}
        renavigate:
          - open: "%s/records/{ref}"
          - wait: {selector: "#record"}
        absent_selector: "#not-found"
        fields:
          - {param: holder, region: %s}
          - {param: amount, selector: "#amount"}
`, cdp, appURL+"/", appURL, region)
	sameSurfaceSection := fmt.Sprintf(`    - kind: onscreen
      onscreen:
        screen: {cdp_url: %q, page_url_prefix: %q}
        same_surface: true
        fields:
          - {param: holder, region: %s}
          - {param: amount, selector: "#amount"}
`, cdp, appURL+"/", region)
	both := writeFile(t, dir, "both.yaml", "effects:\n  candidates:\n"+documentSection+reopenSection)
	reopen := writeFile(t, dir, "reopen.yaml", "effects:\n  candidates:\n"+reopenSection)
	// A screen has no before state: the tier-4 deployment makes no change
	// claim, so the operator turns the rule off for it.
	sameSurface := writeFile(t, dir, "same.yaml", noChangeClaim+"effects:\n  candidates:\n"+sameSurfaceSection)

	changeClaim := writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {amount: {param: amount}}
  count_new_only: true
  risk: irreversible
  timeout_s: 5
- kind: field_equals
  match: {amount: {param: amount}}
  field: holder
  value: {param: holder}
  timeout_s: 5
`)
	noClaim := writeFile(t, dir, "effects-no-claim.yaml", `
- kind: record_written
  match: {amount: {param: amount}}
  forbid_collateral_loss: false
  timeout_s: 5
- kind: field_equals
  match: {amount: {param: amount}}
  field: holder
  value: {param: holder}
  timeout_s: 5
`)

	tests := []struct {
		name       string
		deployment string
		effects    string
		tier       int
		substrate  string
		screen     bool // the reason SCREEN_CONSISTENCY_ONLY is expected
	}{
		{"document selected over onscreen", both, changeClaim, 1, "document", false},
		{"onscreen re-opens the record", reopen, changeClaim, 3, "onscreen", true},
		{"onscreen on the save's own screen", sameSurface, noClaim, 4, "onscreen", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := screenRecord{Ref: fmt.Sprintf("e2e-%d", i), Name: "Grace Hopper", Born: "1906-12-09", Amount: fmt.Sprintf("4,51%d.75", i)}
			b := d.beginWith(t, tt.deployment, tt.effects, "ref="+rec.Ref, "holder="+rec.Name, "amount="+rec.Amount)
			for _, e := range b.Effects {
				if e.Tier != tt.tier || e.Candidate != tt.substrate {
					t.Errorf("begin selected %s at tier %d; want %s at tier %d", e.Candidate, e.Tier, tt.substrate, tt.tier)
				}
			}
			// The automation saves on screen; the application also
			// exports the record, which the document candidate reads.
			automationSave(t, tab, appURL, rec)
			dropFile(t, exports, "record-"+rec.Ref+".json", fmt.Sprintf(`{"holder": %q, "amount": %q}`, rec.Name, rec.Amount), 0)
			v := d.verify(t, b.SessionID)
			if v.Outcome != "VERIFIED" {
				t.Fatalf("verify = %s; want VERIFIED\ndaemon log:\n%s", v.summary(), d.logs())
			}
			for k, e := range v.Effects {
				if e.Tier != tt.tier || e.Substrate != tt.substrate {
					t.Errorf("effect %d: tier/substrate %d/%s; want %d/%s", k, e.Tier, e.Substrate, tt.tier, tt.substrate)
				}
				screen := false
				for _, r := range e.Reasons {
					screen = screen || r.Code == "SCREEN_CONSISTENCY_ONLY"
				}
				if screen != tt.screen {
					t.Errorf("effect %d: SCREEN_CONSISTENCY_ONLY present %v; want %v (%s)", k, screen, tt.screen, v.summary())
				}
			}
		})
	}

	// Without the operator's switch, a tier-4 step cannot make the change
	// claim the default policy requires: the claim needs a baseline a
	// screen does not have, so Begin refuses it.
	t.Run("same surface with a change claim is refused", func(t *testing.T) {
		claimNoPolicy := writeFile(t, dir, "same-claim.yaml", "effects:\n  candidates:\n"+sameSurfaceSection)
		out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, claimNoPolicy), "--effects", changeClaim,
			"--param", "ref=e2e-x", "--param", "holder=Grace Hopper", "--param", "amount=1.00")
		if code != 3 || !strings.Contains(out, "baseline") {
			t.Errorf("begin exit %d: %s; want exit 3, refused for want of a baseline", code, out)
		}
	})
}

// TestOnScreenReadsWhatTheScreenShows: through the real daemon and plugin.
// With row_selector every row on the screen is a record, so a double submit
// the list shows as two rows is REFUTED (COUNT_OVER) where an honest save is
// VERIFIED; and a record page that renews a session token by POST as it
// loads cannot be re-read at tier 3 (INDETERMINATE, the refused POST named)
// until read_post_paths declares that path.
func TestOnScreenReadsWhatTheScreenShows(t *testing.T) {
	buildOnScreen(t)
	cdp := automationBrowser(t)
	honestURL := startProcess(t, "screenapp listening on ", exec.Command(filepath.Join(bins.dir, "screenapp"), "-token", "1"), false)
	doubleURL := startProcess(t, "screenapp listening on ", exec.Command(filepath.Join(bins.dir, "screenapp"), "-mode", "duplicate"), false)
	alloc, cancelAlloc := remote.NewAllocator(context.Background(), cdp)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if _, err := chromedp.Run(tab, chromedp.Navigate(honestURL+"/new")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	list := func(appURL string) string {
		return writeFile(t, dir, "list-"+strings.TrimPrefix(appURL, "http://127.0.0.1:")+".yaml", noChangeClaim+fmt.Sprintf(`effects:
  kind: onscreen
  onscreen:
    screen: {cdp_url: %q, page_url_prefix: %q}
    same_surface: true
    row_selector: "tr.row"
    fields:
      - {param: holder, selector: "td.name"}
      - {param: amount, selector: "td.amount"}
`, cdp, appURL+"/"))
	}
	region, _ := json.Marshal(screenNameRegion)
	reopen := func(name, extra string) string {
		return writeFile(t, dir, name, fmt.Sprintf(`effects:
  kind: onscreen
  newness: newly_matching
  onscreen:
    screen: {cdp_url: %q, page_url_prefix: %q}
    renavigate:
      - open: "%s/records/{ref}"
      - wait: {selector: "#record"}
    absent_selector: "#not-found"
    fields:
      - {param: holder, region: %s}
      - {param: amount, selector: "#amount"}
%s`, cdp, honestURL+"/", honestURL, region, extra))
	}
	noClaim := writeFile(t, dir, "effects-no-claim.yaml", `
- kind: record_written
  match: {amount: {param: amount}}
  forbid_collateral_loss: false
  timeout_s: 3
- kind: field_equals
  match: {amount: {param: amount}}
  field: holder
  value: {param: holder}
  timeout_s: 3
`)
	changeClaim := writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {amount: {param: amount}}
  count_new_only: true
  timeout_s: 3
- kind: field_equals
  match: {amount: {param: amount}}
  field: holder
  value: {param: holder}
  timeout_s: 3
`)
	tests := []struct {
		name, appURL, deployment, effects string
		showList                          bool
		want                              []string // outcome, then decision/class/first code per effect
		reason                            string   // in the first effect's reasons
	}{
		{"list, honest save", honestURL, list(honestURL), noClaim, true,
			[]string{"VERIFIED", "CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}, "SCREEN_CONSISTENCY_ONLY"},
		{"list, double submit", doubleURL, list(doubleURL), noClaim, true,
			[]string{"RECONCILIATION_REQUIRED", "REFUTED/conflicting/COUNT_OVER", "REFUTED/conflicting/FIELD_AMBIGUOUS"}, ""},
		{"token refresh not declared", honestURL, reopen("token-refused.yaml", ""), changeClaim, false,
			[]string{"", "INDETERMINATE/unavailable/SOR_UNREACHABLE", "INDETERMINATE/unavailable/SOR_UNREACHABLE"}, "read_post_paths"},
		{"token refresh declared", honestURL, reopen("token-declared.yaml", "    read_post_paths: [\"/auth/token\"]\n"), changeClaim, false,
			[]string{"VERIFIED", "CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}, "SCREEN_CONSISTENCY_ONLY"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := screenRecord{Ref: fmt.Sprintf("shows-%d", i), Name: "Grace Hopper", Born: "1906-12-09", Amount: fmt.Sprintf("7,21%d.50", i)}
			// The application's tab is on this application's form.
			if _, err := chromedp.Run(tab, chromedp.Navigate(tt.appURL+"/new")); err != nil {
				t.Fatal(err)
			}
			b := d.beginWith(t, tt.deployment, tt.effects, "ref="+rec.Ref, "holder="+rec.Name, "amount="+rec.Amount)
			automationSave(t, tab, tt.appURL, rec)
			if tt.showList {
				if _, err := chromedp.Run(tab, chromedp.Navigate(tt.appURL+"/list")); err != nil {
					t.Fatal(err)
				}
			}
			v := d.verify(t, b.SessionID)
			if tt.want[0] != "" && v.Outcome != tt.want[0] {
				t.Errorf("outcome %s; want %s (%s)", v.Outcome, tt.want[0], v.summary())
			}
			if len(v.Effects) != 2 {
				t.Fatalf("verify = %s; want two effects\ndaemon log:\n%s", v.summary(), d.logs())
			}
			for k, e := range v.Effects {
				got := e.Verdict + "/" + e.Result + "/"
				if len(e.Reasons) > 0 {
					got += e.Reasons[0].Code
				}
				if got != tt.want[k+1] {
					t.Errorf("effect %d: %s; want %s (%s)", k, got, tt.want[k+1], v.summary())
				}
			}
			if tt.reason != "" && !strings.Contains(fmt.Sprint(v.Effects[0].Reasons), tt.reason) {
				t.Errorf("the first effect's reasons %v do not name %s", v.Effects[0].Reasons, tt.reason)
			}
		})
	}
}

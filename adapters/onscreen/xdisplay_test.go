package onscreen

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/judge"
)

// startXvfb starts a virtual X display (Debian's xvfb) on a free display
// number and returns its name.
func startXvfb(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/Xvfb"); err != nil {
		t.Skip("no Xvfb: install Debian's xvfb (scripts/deps.sh)")
	}
	for n := 60; n < 100; n++ {
		if displayTaken(n) {
			continue
		}
		cmd := exec.Command("/usr/bin/Xvfb", fmt.Sprintf(":%d", n), "-screen", "0", "1024x768x24", "-nolisten", "tcp")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		socket := fmt.Sprintf("/tmp/.X11-unix/X%d", n)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			select {
			case <-exited:
				deadline = time.Time{} // taken: try the next number
			default:
			}
			if deadline.IsZero() {
				break
			}
			if _, err := os.Stat(socket); err == nil {
				t.Cleanup(func() { stopXvfb(cmd, exited) })
				return fmt.Sprintf(":%d", n)
			}
		}
		cmd.Process.Kill()
		<-exited
	}
	t.Fatal("no free X display number")
	return ""
}

// displayTaken: display n's lock file names a live process. Xvfb itself
// replaces a lock whose process is gone.
func displayTaken(n int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/tmp/.X%d-lock", n))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return true // not a lock we can judge: leave it alone
	}
	return syscall.Kill(pid, 0) == nil
}

// stopXvfb stops Xvfb with SIGTERM, so that it removes its lock file and
// socket (a killed Xvfb leaves both behind), and kills it if it has not
// gone within five seconds.
func stopXvfb(cmd *exec.Cmd, exited <-chan struct{}) {
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		cmd.Process.Kill() // already gone, or not ours to signal
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// kiosk shows url full screen on display in a Chromium of its own, as a
// GUI application's window would sit on the screen.
func kiosk(t *testing.T, display, url string) {
	t.Helper()
	// Not t.TempDir: Chromium's helper processes can still be writing the
	// profile for a moment after the browser is killed, and t.TempDir's
	// cleanup fails the test on a directory that is not empty.
	dir, err := os.MkdirTemp("", "kiosk-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromiumPaths[0], "--no-sandbox", "--disable-gpu", "--test-type", "--kiosk", "--window-position=0,0",
		"--window-size=1024,768", "--user-data-dir="+filepath.Join(dir, "profile"), "--no-first-run", "--force-device-scale-factor=1", url)
	cmd.Env = []string{"DISPLAY=" + display, "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The whole process group: the browser and its helpers.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		for range 40 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("kiosk profile %s left behind", dir)
	})
}

func displaySection(display string, fields []any) map[string]any {
	return map[string]any{"kind": Kind, "onscreen": map[string]any{
		"screen": map[string]any{"display": display}, "same_surface": true, "fields": fields,
	}}
}

// TestDisplaySource reads fields off an X display (Xvfb, the page shown by
// a kiosk Chromium): the values shown confirm, another value refutes, and a
// selector field is indeterminate (a display has no page structure, and the
// adapter never falls back to OCR for it).
func TestDisplaySource(t *testing.T) {
	display := startXvfb(t)
	a := startApp(t)
	rec := typed("x-1")
	shown := rec
	shown.Name = screenapp.WrongName
	q := func(r screenapp.Record) string {
		return fmt.Sprintf("%s/show?ref=%s&name=%s&born=%s&amount=%s", a.URL, url.QueryEscape(r.Ref), url.QueryEscape(r.Name), url.QueryEscape(r.Born), url.QueryEscape(r.Amount))
	}
	ocrFields := []any{
		map[string]any{"param": "name", "region": region("name")},
		map[string]any{"param": "born", "region": region("born")},
		map[string]any{"param": "amount", "region": region("amount")},
	}
	t.Run("values shown confirm, another name refutes", func(t *testing.T) {
		kiosk(t, display, q(rec))
		p := params(rec)
		c := client(t, request(t, displaySection(display, ocrFields), p))
		// The kiosk takes a moment to start and paint.
		var after captured
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			after = capture(t, c, true)
			if after.Reachable || time.Now().After(deadline) {
				break
			}
		}
		if !after.Reachable || len(after.Records) != 1 || after.Records[0]["id"] != "display"+display {
			t.Fatalf("display read %+v; want one record with id display%s", after, display)
		}
		got := judgeStep(t, c, sameSurfaceEffects, p, captured{Reason: "no before state"}, after)
		checkStep(t, got, judge.Verified, []string{"CONFIRMED/confirmed", "CONFIRMED/confirmed"})

		// The same screen, judged for a run that typed another name.
		other := rec
		other.Name = shown.Name
		po := params(other)
		co := client(t, request(t, displaySection(display, ocrFields), po))
		got = judgeStep(t, co, sameSurfaceEffects, po, captured{Reason: "no before state"}, capture(t, co, true))
		checkStep(t, got, judge.ReconciliationRequired, []string{"CONFIRMED/confirmed", "REFUTED/conflicting"})
	})
	t.Run("a selector field is indeterminate", func(t *testing.T) {
		fields := []any{map[string]any{"param": "name", "selector": "#name"}}
		c := client(t, request(t, displaySection(display, fields), params(rec)))
		got := capture(t, c, true)
		if got.Reachable || !strings.Contains(got.Reason, "no page structure") {
			t.Errorf("selector on a display: %+v; want unreachable, no page structure", got)
		}
	})
}

// FuzzDecodeXWD: a malformed dump is refused, never a panic.
func FuzzDecodeXWD(f *testing.F) {
	hdr := make([]byte, 100)
	put := func(i int, v uint32) {
		hdr[i*4], hdr[i*4+1], hdr[i*4+2], hdr[i*4+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	for i, v := range []uint32{100, 7, 2, 24, 2, 1, 0, 0, 32, 0, 32, 32, 8, 4, 0xff0000, 0xff00, 0xff, 8, 256, 0, 2, 1, 0, 0, 0} {
		put(i, v)
	}
	f.Add(append(hdr, make([]byte, 8)...))
	f.Add([]byte("not a dump"))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decodeXWD(data)
		if err == nil && img.Bounds().Empty() {
			t.Fatal("an empty image decoded without an error")
		}
	})
}

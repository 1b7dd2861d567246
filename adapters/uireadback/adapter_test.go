package uireadback

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/sdk"
)

func TestInfo(t *testing.T) {
	info := New().Info()
	if info.Kind != "ui_readback" || info.Tier != sdk.TierIndependentSession || !info.AbsenceNotProof || info.NeedsBaseline {
		t.Errorf("info = %+v; want kind ui_readback, tier 2, absence not proof", info)
	}
	if !strings.Contains(info.Description, "record page") || !strings.Contains(info.Description, "not a read of the system of record") {
		t.Errorf("description %q does not say it reads a record page, not the system of record", info.Description)
	}
}

func TestTestConnection(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("t1"))
	sec := a.section()
	delete(inner(sec), "empty_selector")
	c := adapterClient(t, request(t, sec, "t1", recordapp.ReaderPassword))
	res, err := c.TestConnection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reachable || !strings.Contains(res.Message, "read 1 rows") || !strings.Contains(res.Message, "not the system of record") {
		t.Errorf("preflight = %+v", res)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "empty_selector") {
		t.Errorf("warnings %q; want one about empty_selector", res.Warnings)
	}

	bad := adapterClient(t, request(t, a.section(), "t1", "wrong"))
	res, err = bad.TestConnection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Reachable || !strings.Contains(res.Message, "sign-in failed") || strings.Contains(res.Message, recordapp.ReaderPassword) {
		t.Errorf("preflight with a wrong password = %+v", res)
	}
}

// TestConcurrentReadBacks: captures may run at once on one adapter; each
// gets its own context and sees its own record.
func TestConcurrentReadBacks(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(intended("k1"))
	ac.save(intended("k1"))
	c := adapterClient(t, request(t, a.section(), "k1", recordapp.ReaderPassword))
	errs := make(chan string, 3)
	for range 3 {
		go func() {
			r, err := tryCapture(c, true, 30*time.Second)
			switch {
			case err != nil:
				errs <- err.Error()
				return
			case !r.Reachable || len(r.Records) != 2:
				errs <- fmt.Sprintf("reachable %v with %d records: %s", r.Reachable, len(r.Records), r.Reason)
				return
			}
			errs <- ""
		}()
	}
	for range 3 {
		if e := <-errs; e != "" {
			t.Errorf("a concurrent read-back: %s", e)
		}
	}
}

// TestBrowserRestarts: a browser process that dies (crash, OOM kill) is
// started again by the next read-back; the read in flight, if any, is
// unusable, never a pass.
func TestBrowserRestarts(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("r1"))
	br := NewBrowser(BrowserOptions{IdleTimeout: -1})
	defer br.Close()
	c := adapterClientWith(t, request(t, a.section(), "r1", recordapp.ReaderPassword), NewWithBrowser(br))
	// Starting Chromium on a loaded machine can take longer than a read's
	// timeout: a read that timed out is made again, with more time.
	if r := mustPatientCapture(t, c, true, 20*time.Second); !r.Reachable {
		t.Fatal(r.Reason)
	}
	pid := br.Pid()
	if pid == 0 {
		t.Fatal("no browser process after a read")
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	deadline := patience(t)
	for {
		r := mustPatientCapture(t, c, true, 20*time.Second)
		if r.Reachable {
			if len(r.Records) != 1 {
				t.Errorf("after the restart: %d records", len(r.Records))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no usable read after the browser was killed: %s", r.Reason)
		}
	}
	if now := br.Pid(); now == pid || now == 0 {
		t.Errorf("browser pid %d after the restart (killed %d)", now, pid)
	}
}

package uireadback

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// TestNoStateCrossesReadBacks: the record page sets a cookie (Set-Cookie)
// and counts its loads in localStorage, which its script shows on each row
// (data-views, read as a field here). Read-backs through the same pooled
// browser: none carries a cookie or sees storage from an earlier one, and
// each signs in again with a session of its own.
func TestNoStateCrossesReadBacks(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("i1"))
	sec := a.section()
	inner(sec)["fields"].(map[string]any)["views"] = map[string]any{"attribute": "data-views"}
	c := adapterClient(t, request(t, sec, "i1", recordapp.ReaderPassword))

	var sessions []string
	for n := range 3 {
		a.ClearRequests()
		r := capture(t, c, true, 20*time.Second)
		if !r.Reachable || len(r.Records) != 1 {
			t.Fatalf("read-back %d: %+v", n+1, r)
		}
		if v := r.Records[0]["views"]; v != "0" {
			t.Errorf("read-back %d: the page counted %v earlier loads in localStorage; want 0", n+1, v)
		}
		// The previous read-back's tab is disposed of in the background, so
		// a request its page had in flight (the beacon) can reach the app
		// after this read-back began. Such a request carries the earlier
		// read-back's own session: it is that read-back's, not state that
		// crossed into this one. A leak shows as this read-back's requests
		// carrying an earlier cookie or storage, which stays asserted.
		var log []recordapp.Request
		for _, req := range a.Requests() {
			if slices.Contains(sessions, req.SessionID) {
				continue
			}
			log = append(log, req)
		}
		sawPage := false
		for _, req := range log {
			// The record page sets last_viewed; until it is served in
			// this read-back, no request may carry one.
			for _, ck := range req.Cookies {
				if strings.HasPrefix(ck, "last_viewed=") && !sawPage {
					t.Errorf("read-back %d: %s %s carried the cookie %s set during an earlier read-back", n+1, req.Method, req.Path, ck)
				}
			}
			if req.Path == "/login" && req.Method == "GET" && req.SessionID != "" {
				t.Errorf("read-back %d: the sign-in page was requested with a session cookie already set", n+1)
			}
			if req.Path == "/patients/i1/encounters" {
				sawPage = true
				if len(req.Cookies) != 1 {
					t.Errorf("read-back %d: the record page was requested with cookies %v; want only the new session's", n+1, req.Cookies)
				}
			}
			if req.Path == "/api/beacon" {
				if req.Query != "views=0" {
					t.Errorf("read-back %d: the page found localStorage from an earlier read-back (%s)", n+1, req.Query)
				}
			}
		}
		if !sawPage {
			t.Fatalf("read-back %d: the record page was not requested; log %+v", n+1, log)
		}
		ids := recordapp.SessionIDs(log, recordapp.ReaderUser)
		if len(ids) != 1 {
			t.Fatalf("read-back %d used reader sessions %v; want exactly one", n+1, ids)
		}
		for _, s := range sessions {
			if s == ids[0] {
				t.Errorf("read-back %d reused the session of an earlier read-back", n+1)
			}
		}
		sessions = append(sessions, ids[0])
	}
}

// TestActingSessionNeverReachesReadBack: the clerk's session (the screen
// that typed) writes; no request of the read-back carries it.
func TestActingSessionNeverReachesReadBack(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	c := adapterClient(t, request(t, a.section(), "i2", recordapp.ReaderPassword))
	a.AddPatient("i2")
	a.ClearRequests()
	before := capture(t, c, false, 20*time.Second)
	ac.save(intended("i2"))
	after := capture(t, c, true, 20*time.Second)
	if v := judgeStep(t, c, map[string]string{"patient_id": "i2", "note": savedNote}, before, after); v.outcome != judge.Verified {
		t.Fatalf("step = %s", v)
	}
	acting := ac.session()
	readerRequests := 0
	for _, req := range a.Requests() {
		isAPI := strings.HasPrefix(req.Path, "/api/encounters")
		switch {
		case isAPI && req.SessionID != acting:
			t.Errorf("the acting screen's write %s %s went without its session", req.Method, req.Path)
		case !isAPI && req.SessionID == acting:
			t.Errorf("the read-back's request %s %s carried the acting session's cookie", req.Method, req.Path)
		case !isAPI && req.SessionUser == recordapp.ReaderUser:
			readerRequests++
		}
	}
	if readerRequests == 0 {
		t.Error("no request carried a reader session; the log does not show the read-backs")
	}
}

// TestPagePostRefused: a record page that POSTs as it loads makes the read
// unusable, and the POST never reaches the application, with both guards
// and with either one alone.
func TestPagePostRefused(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("i3"))
	tests := []struct {
		name                  string
		noPageGuard, noNetwok bool
		layer                 string
	}{
		{"both guards", false, false, "page guard"},
		{"page guard alone", false, true, "page guard"},
		{"network guard alone", true, false, "network guard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			factory := func() sdk.Adapter {
				return withHooks(hooks{noPageGuard: tt.noPageGuard, noNetworkGuard: tt.noNetwok})()
			}
			c := adapterClientWith(t, request(t, a.section(), "i3", recordapp.ReaderPassword), factory)
			a.SetFaults(recordapp.Faults{PostOnLoad: true})
			defer a.SetFaults(recordapp.Faults{})
			a.ClearRequests()
			r := capture(t, c, true, 20*time.Second)
			if r.Reachable {
				t.Fatalf("a page that posted read as usable: %v", r.Records)
			}
			if !strings.Contains(r.Reason, "non-read request: POST "+a.URL+"/api/viewed") || !strings.Contains(r.Reason, tt.layer) {
				t.Errorf("reason %q; want the refused POST of /api/viewed by the %s", r.Reason, tt.layer)
			}
			for _, req := range a.Requests() {
				if req.Method != "GET" && req.Path != "/login" {
					t.Errorf("%s %s reached the application", req.Method, req.Path)
				}
			}
			v := judgeStep(t, c, map[string]string{"patient_id": "i3", "note": savedNote}, read{Reachable: true}, r)
			if v.outcome == judge.Verified || v.verdicts[0].Decision != judge.Indeterminate {
				t.Errorf("step = %s; want INDETERMINATE", v)
			}
		})
	}
	t.Run("network guard alone, posting until the tab closes", func(t *testing.T) {
		// The page keeps posting after the read has ended: every request
		// still paused when the read-back lets go of its tab must die with
		// the tab, never be let through.
		factory := withHooks(hooks{noPageGuard: true})
		c := adapterClientWith(t, request(t, a.section(), "i3", recordapp.ReaderPassword), factory)
		a.SetFaults(recordapp.Faults{PostOnLoad: true, PostEveryMS: 5})
		defer a.SetFaults(recordapp.Faults{})
		a.ClearRequests()
		if r := capture(t, c, true, 20*time.Second); r.Reachable {
			t.Fatalf("a page that posted read as usable: %v", r.Records)
		}
		time.Sleep(2 * time.Second) // the tab is closed in the background
		for _, req := range a.Requests() {
			if req.Method != "GET" && req.Path != "/login" {
				t.Errorf("%s %s reached the application", req.Method, req.Path)
			}
		}
	})
	t.Run("a dedicated worker's POST", func(t *testing.T) {
		// The page guard does not run inside a worker, so it refuses to
		// start one; with the page guard off, the network guard sees the
		// worker's request. The page is ready only once the POST has
		// settled, so the read cannot end before it. Without the guards the
		// same POST arrives: the check can fail.
		for _, mode := range []string{"both guards", "network guard alone", "unguarded"} {
			factory := func() sdk.Adapter {
				return withHooks(hooks{noPageGuard: mode != "both guards", noNetworkGuard: mode == "unguarded"})()
			}
			c := adapterClientWith(t, request(t, a.section(), "i3", recordapp.ReaderPassword), factory)
			a.SetFaults(recordapp.Faults{PostFromWorker: true})
			a.ClearRequests()
			r := capture(t, c, true, 20*time.Second)
			a.SetFaults(recordapp.Faults{})
			time.Sleep(time.Second) // the tab is closed in the background
			posts := 0
			for _, req := range a.Requests() {
				if req.Method == "POST" && req.Path == "/api/viewed" {
					posts++
				}
			}
			if mode == "unguarded" {
				if posts == 0 {
					t.Error("with no guard the worker's POST never arrived; the guarded checks prove nothing")
				}
				continue
			}
			if r.Reachable {
				t.Errorf("%s: a page whose worker posted read as usable: %v", mode, r.Records)
			}
			want := "non-read request: POST " + a.URL + "/api/viewed"
			layer := "network guard"
			if mode == "both guards" {
				want, layer = "non-read request: WORKER", "page guard"
			}
			if !strings.Contains(r.Reason, want) || !strings.Contains(r.Reason, layer) {
				t.Errorf("%s: reason %q; want %q refused by the %s", mode, r.Reason, want, layer)
			}
			if posts != 0 {
				t.Errorf("%s: the worker's POST reached the application %d time(s)", mode, posts)
			}
		}
	})
	t.Run("unguarded control", func(t *testing.T) {
		// Without either guard the same page's POST does reach the
		// application: the test above can fail.
		factory := withHooks(hooks{noPageGuard: true, noNetworkGuard: true})
		c := adapterClientWith(t, request(t, a.section(), "i3", recordapp.ReaderPassword), factory)
		a.SetFaults(recordapp.Faults{PostOnLoad: true})
		defer a.SetFaults(recordapp.Faults{})
		a.ClearRequests()
		capture(t, c, true, 20*time.Second)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			for _, req := range a.Requests() {
				if req.Method == "POST" && req.Path == "/api/viewed" {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Error("with no guard the page's POST never arrived; the refusal tests prove nothing")
	})
}

// TestSignInPostOnlyWhileSigningIn: the sign-in form's POST is allowed while
// signing in; once signed in, a POST to the same URL is refused like any
// other write.
func TestSignInPostOnlyWhileSigningIn(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("i4"))
	c := adapterClient(t, request(t, a.section(), "i4", recordapp.ReaderPassword))
	a.SetFaults(recordapp.Faults{PostOnLoad: true, PostTo: "/login"})
	defer a.SetFaults(recordapp.Faults{})
	a.ClearRequests()
	r := capture(t, c, true, 20*time.Second)
	if r.Reachable || !strings.Contains(r.Reason, "non-read request: POST "+a.URL+"/login") {
		t.Fatalf("read = %+v; want the record page's POST to the sign-in URL refused", r)
	}
	posts := 0
	for _, req := range a.Requests() {
		if req.Method == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("%d POSTs reached the application; want the sign-in's alone", posts)
	}
}

// TestReadPostPaths: a read endpoint that uses POST, declared in
// read_post_paths, may be posted to during the read.
func TestReadPostPaths(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("i5"))
	sec := a.section()
	inner(sec)["read_post_paths"] = []any{"/api/viewed"}
	c := adapterClient(t, request(t, sec, "i5", recordapp.ReaderPassword))
	a.SetFaults(recordapp.Faults{PostOnLoad: true})
	defer a.SetFaults(recordapp.Faults{})
	if r := capture(t, c, true, 20*time.Second); !r.Reachable || len(r.Records) != 1 {
		t.Fatalf("read = %+v; want the page read, its POST to a declared read path allowed", r)
	}
}

package uireadback

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// unavailable checks that every verdict of v is INDETERMINATE, classed
// unavailable, for SOR_UNREACHABLE alone.
func unavailable(t *testing.T, v stepVerdict) {
	t.Helper()
	for _, e := range v.verdicts {
		if e.Decision != judge.Indeterminate || e.Class != judge.ClassUnavailable || strings.Join(e.Codes(), "+") != judge.ReasonSORUnreachable {
			t.Errorf("verdict %s/%s/%v; want INDETERMINATE/unavailable/SOR_UNREACHABLE", e.Decision, e.Class, e.Codes())
		}
	}
}

// signInPosts counts the sign-in POSTs the application received.
func signInPosts(a *app) int {
	n := 0
	for _, r := range a.Requests() {
		if r.Method == "POST" && (r.Path == "/login" || r.Path == "/session") {
			n++
		}
	}
	return n
}

// TestSignInRefusalIsTheReason: a sign-in form that posts to another URL
// than sign_in.url has its POST refused by the guards, and the sign-in then
// times out; the read's reason is the refusal, which explains the timeout
// and says what to change, with both guards and with the network guard
// alone.
func TestSignInRefusalIsTheReason(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("gr1"))
	sec := a.section()
	inner(sec)["navigation_timeout_s"] = 2
	for _, tt := range []struct {
		name  string
		h     hooks
		layer string
	}{
		{"both guards", hooks{}, "page guard"},
		{"network guard alone", hooks{noPageGuard: true}, "network guard"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := adapterClientWith(t, request(t, sec, "gr1", recordapp.ReaderPassword), withHooks(tt.h))
			a.SetFaults(recordapp.Faults{SignInAction: "/session"})
			defer a.SetFaults(recordapp.Faults{})
			a.ClearRequests()
			r := capture(t, c, true, 20*time.Second)
			if r.Reachable {
				t.Fatalf("read as usable with records %v", r.Records)
			}
			const prefix = "record page read in a separate session: "
			for _, want := range []string{prefix + "signing in did not finish because the read-only guards refused a request: POST ", "/session via ", "refused by the " + tt.layer, "the refusal is why", "write that URL as sign_in.url"} {
				if !strings.Contains(r.Reason, want) {
					t.Errorf("reason %q; want it to contain %q", r.Reason, want)
				}
			}
			if n := signInPosts(a); n != 0 {
				t.Errorf("%d refused sign-in POSTs reached the application", n)
			}
			unavailable(t, judgeStep(t, c, map[string]string{"patient_id": "gr1", "note": savedNote}, read{Reachable: true}, r))
		})
	}
}

// TestRejectedCredentialNotRetried: a credential the application rejects
// is tried once (sign_in.max_attempts, default 1); the reads that follow
// within the settlement window answer at once, without signing in, and the
// verdict is INDETERMINATE with the task RESTORE_ACCESS. A failure that is
// not a rejection (the application down) is tried again on the next read.
func TestRejectedCredentialNotRetried(t *testing.T) {
	a := startApp(t)
	signInActor(t, a).save(intended("rc1"))
	params := map[string]string{"patient_id": "rc1", "note": savedNote}

	for _, attempts := range []int{0, 2} {
		name := "default"
		if attempts > 0 {
			name = "max_attempts " + strconv.Itoa(attempts)
		}
		t.Run(name, func(t *testing.T) {
			sec := a.section()
			want := 1
			if attempts > 0 {
				inner(sec)["sign_in"].(map[string]any)["max_attempts"] = attempts
				want = attempts
			}
			c := adapterClient(t, request(t, sec, "rc1", "not-the-password"))
			a.ClearRequests()
			var last read
			for i := range want + 2 {
				start := time.Now()
				last = capture(t, c, true, 20*time.Second)
				took := time.Since(start)
				if last.Reachable {
					t.Fatalf("read %d usable with a rejected credential", i+1)
				}
				switch {
				case i < want && !strings.Contains(last.Reason, "the sign-in failed: the sign-in form came back"):
					t.Errorf("read %d: reason %q; want the failed sign-in", i+1, last.Reason)
				case i == want-1 && !strings.Contains(last.Reason, "it is not tried again for 1m0s (sign_in.max_attempts is "+strconv.Itoa(want)+")"):
					t.Errorf("read %d: reason %q; want it to say the credential is not tried again", i+1, last.Reason)
				case i >= want && (!strings.Contains(last.Reason, "the application rejected the read-back account's credential") || !strings.Contains(last.Reason, "restore the account's access")):
					t.Errorf("read %d: reason %q; want the held credential", i+1, last.Reason)
				case i >= want && took > time.Second:
					t.Errorf("read %d took %v; a held credential answers at once", i+1, took)
				}
				// From the read that makes the gate hold, the daemon is
				// told to read no more (sdk.CodeAccessRejected).
				if wantCode := map[bool]string{true: sdk.CodeAccessRejected}[i >= want-1]; last.Code != wantCode {
					t.Errorf("read %d: code %q; want %q", i+1, last.Code, wantCode)
				}
			}
			if n := signInPosts(a); n != want {
				t.Errorf("%d sign-in POSTs over %d reads; want %d", n, want+2, want)
			}
			if strings.Contains(last.Reason, "not-the-password") {
				t.Error("the reason quotes the password")
			}
			v := judgeStep(t, c, params, read{Reachable: true}, last)
			for _, e := range v.verdicts {
				if e.Decision != judge.Indeterminate || e.Class != judge.ClassUnavailable || strings.Join(e.Codes(), "+") != judge.ReasonAccessRejected {
					t.Errorf("verdict %s/%s/%v; want INDETERMINATE/unavailable/ACCESS_REJECTED", e.Decision, e.Class, e.Codes())
				}
			}
			if v.tasks[0] == nil || v.tasks[0].SuggestedAction != judge.ActionRestoreAccess || v.tasks[0].Kind != judge.TaskEffectIndeterminate {
				t.Errorf("task %+v; want effect_indeterminate with RESTORE_ACCESS", v.tasks[0])
			}
		})
	}

	t.Run("transient failure tried again", func(t *testing.T) {
		c := adapterClient(t, request(t, a.section(), "rc1", recordapp.ReaderPassword))
		a.SetFaults(recordapp.Faults{Down: true})
		r := capture(t, c, true, 20*time.Second)
		a.SetFaults(recordapp.Faults{})
		if r.Reachable || !strings.Contains(r.Reason, "HTTP 503") || r.Code != "" {
			t.Fatalf("read with the application down: %v %q code %q; want unreachable, no code (the daemon reads again)", r.Reachable, r.Reason, r.Code)
		}
		a.ClearRequests()
		if r := capture(t, c, true, 20*time.Second); !r.Reachable || len(r.Records) != 1 {
			t.Fatalf("read after the application came back: %v %q %v", r.Reachable, r.Reason, r.Records)
		}
		if n := signInPosts(a); n != 1 {
			t.Errorf("%d sign-in POSTs; want 1", n)
		}
	})
}

// paramEffects reads the encounter's type and date from run parameters
// spelled as the clerk typed them: capitals, and the date as the form shows
// it.
const paramEffects = `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: {param: type}}
  count_new_only: true
  risk: irreversible
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: {param: type}}
  field: date
  value: {param: visit_date}
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: {param: type}}
  field: note
  value: {param: note}
`

// TestSymmetricNormalisation: the contract's values are normalised as the
// values read are (whitespace collapsed, date_format, casefold), so an
// honest save spelled otherwise than the page shows it is CONFIRMED, and a
// save that differs in more than the normalisation is still REFUTED.
func TestSymmetricNormalisation(t *testing.T) {
	a := startApp(t)
	tests := []struct {
		name, patient string
		params        map[string]string // beside patient_id
		saved         recordapp.Encounter
		want          string
	}{
		{"two spaces in the note and the identifier", "n  1",
			map[string]string{"type": "Triage", "visit_date": "06/05/2026", "note": "Follow-up  in 2 weeks"},
			recordapp.Encounter{Type: "Triage", Note: "Follow-up  in 2 weeks", Date: "2026-05-06"},
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL"},
		{"capitals and a displayed date", "n2",
			map[string]string{"type": "TriAGE", "visit_date": "06/05/2026", "note": savedNote},
			recordapp.Encounter{Type: "Triage", Note: savedNote, Date: "2026-05-06"},
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL"},
		{"an ISO date and lower case, as before", "n3",
			map[string]string{"type": "triage", "visit_date": "2026-05-06", "note": savedNote},
			recordapp.Encounter{Type: "Triage", Note: savedNote, Date: "2026-05-06"},
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL"},
		{"another date", "n4",
			map[string]string{"type": "Triage", "visit_date": "07/05/2026", "note": savedNote},
			recordapp.Encounter{Type: "Triage", Note: savedNote, Date: "2026-05-06"},
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH CONFIRMED/confirmed/FIELD_EQUAL"},
		{"another case in a field not casefolded", "n5",
			map[string]string{"type": "Triage", "visit_date": "06/05/2026", "note": "follow-up in 2 weeks"},
			recordapp.Encounter{Type: "Triage", Note: savedNote, Date: "2026-05-06"},
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL REFUTED/conflicting/FIELD_MISMATCH"},
		{"other words", "n6",
			map[string]string{"type": "Triage", "visit_date": "06/05/2026", "note": "Follow-up  in 3 weeks"},
			recordapp.Encounter{Type: "Triage", Note: "Follow-up  in 2 weeks", Date: "2026-05-06"},
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL REFUTED/conflicting/FIELD_MISMATCH"},
	}
	ac := signInActor(t, a)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]string{"patient_id": tt.patient}
			maps.Copy(params, tt.params)
			a.AddPatient(tt.patient)
			req := request(t, a.section(), tt.patient, recordapp.ReaderPassword)
			req.Params = params
			c := adapterClient(t, req)
			before := capture(t, c, false, 20*time.Second)
			e := tt.saved
			e.PatientID = tt.patient
			ac.save(e)
			after := capture(t, c, true, 20*time.Second)
			if !before.Reachable || !after.Reachable {
				t.Fatalf("reads: %q, %q", before.Reason, after.Reason)
			}
			if got := judgeEffects(t, c, paramEffects, params, before, after).String(); got != tt.want {
				t.Errorf("step = %s\nwant   %s\nafter: %v", got, tt.want, after.Records)
			}
		})
	}

	// The contract's own value, when the daemon sends it (one contract
	// read), is the spelling a casefolded field is reported in.
	t.Run("the contract's literal in the selector", func(t *testing.T) {
		c := adapterClient(t, request(t, a.section(), "n2", recordapp.ReaderPassword))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		capt, err := c.CaptureAfter(ctx, sdk.CaptureRequest{CaptureID: "sel", Timeout: 20 * time.Second, EffectKind: "record_written",
			Selector: map[string]string{"patient_id": "n2", "type": "Triage"}})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := capt.Records()
		if err != nil || !capt.Reachable || len(recs) != 1 || recs[0]["type"] != "Triage" {
			t.Fatalf("read %v %q %v %v; want the one row with type as the selector spells it", capt.Reachable, capt.Reason, recs, err)
		}
		after := read{Reachable: true, Records: recs}
		v := judgeEffects(t, c, "- kind: record_written\n  match: {patient_id: {param: patient_id}, type: Triage}\n", map[string]string{"patient_id": "n2"}, read{Reachable: true}, after)
		if got := v.String(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
			t.Errorf("step = %s", got)
		}
	})
}

// TestTruncationMarkersPerField: a field whose own truncation_markers are
// empty reads a value with "..." as it is, so a field no contract reads no
// longer makes every read unusable; the other fields keep the section's
// markers.
func TestTruncationMarkersPerField(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(recordapp.Encounter{PatientID: "tm1", Type: "Triage", Note: "Call back... maybe", Date: savedDate})
	const countOnly = "- kind: record_written\n  match: {patient_id: {param: patient_id}, type: triage}\n"
	params := map[string]string{"patient_id": "tm1"}

	c := adapterClient(t, request(t, a.section(), "tm1", recordapp.ReaderPassword))
	r := capture(t, c, true, 20*time.Second)
	if r.Reachable || !strings.Contains(r.Reason, "field note: the value contains the truncation marker") {
		t.Fatalf("with the section's markers: %v %q", r.Reachable, r.Reason)
	}
	unavailable(t, judgeEffects(t, c, countOnly, params, read{Reachable: true}, r))

	sec := a.section()
	inner(sec)["fields"].(map[string]any)["note"] = map[string]any{"selector": "td.note", "truncation_markers": []string{}}
	c = adapterClient(t, request(t, sec, "tm1", recordapp.ReaderPassword))
	r = capture(t, c, true, 20*time.Second)
	if !r.Reachable || len(r.Records) != 1 || r.Records[0]["note"] != "Call back... maybe" {
		t.Fatalf("with no markers for note: %v %q %v", r.Reachable, r.Reason, r.Records)
	}
	if got := judgeEffects(t, c, countOnly, params, read{Reachable: true}, r).String(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("step = %s", got)
	}

	// The type keeps the section's markers.
	ac.save(recordapp.Encounter{PatientID: "tm1", Type: "Triage...", Note: "x", Date: savedDate})
	if r := capture(t, c, true, 20*time.Second); r.Reachable || !strings.Contains(r.Reason, "field type: the value contains the truncation marker") {
		t.Errorf("a marker in type: %v %q", r.Reachable, r.Reason)
	}
}

// pluginWithBrowser starts the plugin binary with a temporary folder of
// its own, reads once through it (which starts Chromium) and returns the
// instance, its process id and its browser's folder.
func pluginWithBrowser(t *testing.T) (*adaptertest.Instance, int, string) {
	t.Helper()
	a := startApp(t)
	signInActor(t, a).save(intended("st1"))
	// A short folder: Chromium's socket path inside it has a length limit.
	tmp, err := os.MkdirTemp("", "uirb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	in := adaptertest.Subprocess(t, pluginBinary, "TMPDIR="+tmp)
	req := request(t, a.section(), "st1", recordapp.ReaderPassword)
	if err := in.Setup(t.Context(), req.ConfigureRequest, req.Params); err != nil {
		t.Fatal(err)
	}
	if r := capture(t, in, true, 30*time.Second); !r.Reachable {
		t.Fatal(r.Reason)
	}
	pid := in.Pid()
	dirs, _ := filepath.Glob(filepath.Join(tmp, tempPrefix+strconv.Itoa(pid)+"-*"))
	if len(dirs) != 1 {
		t.Fatalf("browser folders %v; want one for process %d", dirs, pid)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "profile")); err != nil {
		t.Fatalf("no profile in the browser folder: %v", err)
	}
	if n := len(processesMentioning(dirs[0])); n == 0 {
		t.Fatal("no Chromium process runs with the folder")
	}
	return in, pid, dirs[0]
}

// browserGone waits for the plugin process pid to end and checks that
// its browser's folder and every process using it are gone.
func browserGone(t *testing.T, pid int, dir string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin process %d still runs 20 s after it was stopped", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the browser folder %s outlived the plugin (stat: %v)", dir, err)
	}
	if ps := processesMentioning(dir); len(ps) > 0 {
		t.Errorf("processes %v still run with the browser folder", ps)
	}
}

// TestSIGTERMRemovesProfile: the plugin binary, sent SIGTERM by its process
// id, stops Chromium and removes the browser's temporary folder (its
// profile) before it ends; so does a plugin the daemon stops.
func TestSIGTERMRemovesProfile(t *testing.T) {
	t.Run("SIGTERM", func(t *testing.T) {
		_, pid, dir := pluginWithBrowser(t)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		browserGone(t, pid, dir)
	})
	t.Run("stopped by the daemon", func(t *testing.T) {
		in, pid, dir := pluginWithBrowser(t)
		in.Stop() // what the daemon does to stop a plugin
		browserGone(t, pid, dir)
	})
}

// processesMentioning lists the processes whose command line holds s.
func processesMentioning(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmd), s) {
			out = append(out, pid)
		}
	}
	return out
}

package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSettleFloor: the daemon's policy.min_settle_s holds every change
// claim of an irreversible step open for that long after its first
// CONFIRMED, although the deployment sets no settle_s. A second click that
// lands half a second into Verify is caught (REFUTED, COUNT_OVER: not
// VERIFIED); an honest save is still VERIFIED, after watching the window.
// The read is the sql adapter's, over the clinic's SQLite database.
func TestSettleFloor(t *testing.T) {
	c := newClinic(t)
	d, _ := trustDaemon(t, c, "policy:\n  min_settle_s: 1\n")
	begin := func(patient string) string {
		t.Helper()
		out, code := d.ctl(t, "begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "save_triage",
			"--param", "patient_id="+patient, "--param", "note=Follow-up")
		if code != 0 {
			t.Fatalf("begin exit %d: %s\n%s", code, out, d.logs())
		}
		return mustJSON[beginOutput](t, out).SessionID
	}

	t.Run("honest save", func(t *testing.T) {
		sid := begin("p1")
		c.save(t, "p1", "Follow-up", 1)
		start := time.Now()
		v := d.verify(t, sid)
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Errorf("verify answered in %s: the 1 s settle floor was not watched", took)
		}
		if got := v.summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL" {
			t.Errorf("honest save = %s, want VERIFIED", got)
		}
	})

	t.Run("duplicate lands mid-verify", func(t *testing.T) {
		sid := begin("p2")
		c.save(t, "p2", "Follow-up", 1)
		type answer struct {
			out  []byte
			err  error
			took time.Duration
		}
		done := make(chan answer, 1)
		start := time.Now()
		go func() {
			var stdout bytes.Buffer
			cmd := exec.Command(filepath.Join(bins.dir, "verifyctl"), "verify", "--session", sid, "--addr", d.addr)
			cmd.Stdout = &stdout
			err := cmd.Run()
			done <- answer{stdout.Bytes(), err, time.Since(start)}
		}()
		time.Sleep(500 * time.Millisecond)
		c.save(t, "p2", "Follow-up", 1) // the second click
		landed := time.Since(start)
		a := <-done
		if landed >= a.took {
			t.Fatalf("the duplicate landed %s after Verify began, but Verify answered at %s: the test did not land it inside Verify", landed, a.took)
		}
		v := mustJSON[verifyOutput](t, string(a.out))
		if v.Outcome == "VERIFIED" || len(v.Effects) == 0 || v.Effects[0].Verdict != "REFUTED" || len(v.Effects[0].Reasons) == 0 || v.Effects[0].Reasons[0].Code != "COUNT_OVER" {
			t.Fatalf("late duplicate = %s (verifyctl: %v), want the record_written REFUTED with COUNT_OVER", v.summary(), a.err)
		}
		if v.Effects[0].ObservedCount == nil || *v.Effects[0].ObservedCount != 2 {
			t.Errorf("observed count %v, want 2 new records", v.Effects[0].ObservedCount)
		}
		// The read-back is not irreversible itself, but its step is: it
		// carries a task as well.
		if len(v.Effects) != 2 || v.Effects[1].Verdict == "CONFIRMED" || len(v.Effects[1].ReconciliationTask) == 0 || string(v.Effects[1].ReconciliationTask) == "null" {
			t.Errorf("read-back %+v, want a non-confirmed verdict with a reconciliation task", v.Effects[1:])
		}
	})
}

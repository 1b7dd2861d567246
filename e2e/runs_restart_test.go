package e2e

import (
	"testing"
)

// TestRunSurvivesKill9: the daemon is killed with kill -9 between two steps
// of a run, and again between the last Verify and FinishRun; restarted on
// the same data dir, it hands intake's record id to posting from what it
// stored, and seals the run VERIFIED with a receipt that verifies offline.
func TestRunSurvivesKill9(t *testing.T) {
	s := newRunSoR(t)
	d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: s.config("")})
	run := d.runBegin(t, "ledger", "p-crash")
	sid := d.mustStep(t, run, "intake")
	intake := s.insert(t, "intake", "p-crash", 0, "")
	d.verifyStep(t, sid, "VERIFIED")

	d.kill9() // between two steps
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	// The order still holds after the restart: send needs its letter.
	if b, out, code := d.stepBegin(t, run, "send"); code != exitRefusedCode || b.SessionID != "" {
		t.Errorf("send right after the restart: exit %d %s; want a refusal", code, out)
	}
	continueRun(t, d, s, run, "p-crash", intake)

	d.kill9() // between the last Verify and FinishRun
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	r := d.finishVerified(t, run, 1)
	if got := r.stepOutcomes(); got != "intake=VERIFIED posting=VERIFIED letter=VERIFIED send=VERIFIED" {
		t.Errorf("steps: %s", got)
	}
}

// continueRun drives posting, letter and send of a run whose intake was
// verified.
func continueRun(t *testing.T, d *daemon, s *runSoR, run, patient string, intake int64) {
	t.Helper()
	sid := d.mustStep(t, run, "posting", "note=Booked")
	s.insert(t, "posting", patient, intake, "Booked")
	d.verifyStep(t, sid, "VERIFIED")
	sid = d.mustStep(t, run, "letter")
	s.insert(t, "letter", patient, 0, "")
	letter := s.writeLetter(t, patient)
	d.verifyStep(t, sid, "VERIFIED")
	if v := d.artifactVerify(t, run, letter); v != "CONFIRMED" {
		t.Fatalf("artifact verify of the letter = %s", v)
	}
	sid = d.mustStep(t, run, "send")
	s.insert(t, "dispatch", patient, 0, "")
	d.verifyStep(t, sid, "VERIFIED")
}

// TestRunReplicasKill9: two replicas on one PostgreSQL store. The run is
// begun and its first step verified on A, which is killed with kill -9; B
// carries the run through the other steps and is killed in turn between
// the last Verify and FinishRun; A, restarted, seals it VERIFIED.
func TestRunReplicasKill9(t *testing.T) {
	s := newRunSoR(t)
	ds := replicasWith(t, 2, daemonOpts{pluginDir: bins.pluginDir, config: s.config("")})
	a, b := ds[0], ds[1]
	run := a.runBegin(t, "ledger", "p-replica")
	sid := a.mustStep(t, run, "intake")
	intake := s.insert(t, "intake", "p-replica", 0, "")
	a.verifyStep(t, sid, "VERIFIED")
	a.kill9()

	// B sees the run A began and the step A verified: it refuses send
	// before its letter, and hands intake's record id on to posting.
	if bo, out, code := b.stepBegin(t, run, "send"); code != exitRefusedCode || bo.SessionID != "" {
		t.Errorf("send on B before its letter: exit %d %s; want a refusal", code, out)
	}
	continueRun(t, b, s, run, "p-replica", intake)
	b.kill9()

	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	r := a.finishVerified(t, run, 1)
	if got := r.stepOutcomes(); got != "intake=VERIFIED posting=VERIFIED letter=VERIFIED send=VERIFIED" {
		t.Errorf("steps: %s", got)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestOneAdapterProcessServesEveryPatient: sessions for five patients (new
// run parameters each) through the real daemon and sql plugin each read
// their own patient's rows, and the daemon runs one sql process for all of
// them (issue 13: parameters travel with each call, never select a
// process). A missing parameter is refused at Begin, before any read.
func TestOneAdapterProcessServesEveryPatient(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	for i := range 5 {
		patient := fmt.Sprintf("one-process-%d", i)
		b := d.begin(t, c, patient, "Follow-up")
		c.save(t, patient, "Follow-up", i%2+1) // odd patients double-submit
		v := d.verify(t, b.SessionID)
		want := "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"
		if i%2 == 1 {
			want = "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"
		}
		if got := v.summary(); got != want {
			t.Errorf("patient %s: verify = %s\nwant     %s", patient, got, want)
		}
		if n := v.Effects[0].ObservedCount; n == nil || *n != i%2+1 {
			t.Errorf("patient %s: observed_count = %v, want %d (its own rows only)", patient, n, i%2+1)
		}
		if procs := adapterProcs(d.cmd.Process.Pid)["sql"]; len(procs) != 1 {
			t.Fatalf("after patient %d the daemon runs %d sql processes %v; want 1", i, len(procs), procs)
		}
	}
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, c.deployment), "--effects", c.effects, "--param", "note=Follow-up")
	if code == 0 || !strings.Contains(out, "patient_id") {
		t.Fatalf("begin without patient_id: exit %d, %s; want a refusal naming patient_id", code, out)
	}
	if procs := adapterProcs(d.cmd.Process.Pid)["sql"]; len(procs) != 1 {
		t.Errorf("after the refusal the daemon runs %d sql processes; want 1", len(procs))
	}
}

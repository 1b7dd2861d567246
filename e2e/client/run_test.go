package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/client"
)

// insert writes an encounter of the given type, as the automation would,
// and returns its id.
func (c *clinic) insert(t *testing.T, patient, typ, note string) int64 {
	t.Helper()
	res, err := c.db.Exec(`INSERT INTO encounters (patient_id, type, note) VALUES (?, ?, ?)`, patient, typ, note)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func visit(t *testing.T, cl *client.Client, patient string) *client.Run {
	t.Helper()
	run, err := cl.BeginRun(t.Context(), client.RunRequest{Workflow: "visit", Deployment: "clinic", Params: map[string]string{"patient_id": patient}})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID == "" || run.Deployment != "clinic" {
		t.Fatalf("run %+v", run)
	}
	return run
}

// TestRunVerified: both steps of the visit, the follow-up naming the
// triage encounter it was handed; Finish returns the run VERIFIED with a
// run receipt checked against the daemon's key, and GetRun reports the
// same seal.
func TestRunVerified(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	ctx := t.Context()
	run := visit(t, cl, "r1")
	var triage int64
	if err := run.Step(ctx, "triage", map[string]string{"note": "fever"}, func(ctx context.Context) error {
		s, ok := client.SessionFrom(ctx)
		if !ok || s.RegisteredStep == nil || s.RegisteredStep.Step != "triage" || s.RegisteredStep.Workflow != "visit" {
			return fmt.Errorf("the action's session is %+v, want the run's triage step", s)
		}
		triage = c.insert(t, "r1", "Triage", "fever")
		return nil
	}); err != nil {
		t.Fatalf("triage: %v", err)
	}
	if err := run.Step(ctx, "follow_up", nil, func(context.Context) error {
		c.insert(t, "r1", "FollowUp", fmt.Sprint(triage))
		return nil
	}); err != nil {
		t.Fatalf("follow_up: %v", err)
	}
	res, err := run.Finish(ctx)
	if err != nil {
		t.Fatalf("Finish = %v, want nil", err)
	}
	if res.Outcome != client.Verified || res.Attempt != 1 || res.State != "sealed" || res.Tier != 1 || len(res.Steps) != 2 || len(res.Reasons) != 0 {
		t.Fatalf("run = %+v, want VERIFIED at attempt 1 with two steps", res)
	}
	for i, name := range []string{"triage", "follow_up"} {
		if s := res.Steps[i]; s.Step != name || s.Outcome != client.Verified || s.SessionID == "" || !s.Consequential || !strings.HasPrefix(s.ReceiptDigest, "sha256:") {
			t.Errorf("step %d = %+v", i, s)
		}
	}
	p, err := res.CheckReceipt(c.pub)
	if err != nil || p.RunID != run.ID || p.Outcome != "VERIFIED" || len(p.Handoffs) != 1 || p.Handoffs[0].Param != "triage_id" {
		t.Fatalf("run receipt: %+v, %v", p, err)
	}
	got, err := cl.GetRun(ctx, run.ID)
	if err != nil || got.Outcome != client.Verified || string(got.Receipt) != string(res.Receipt) {
		t.Fatalf("GetRun = %+v, %v; want the same seal", got, err)
	}
}

// TestRunRefusalsAndNotVerified: a step out of order is refused before its
// action runs; a handed-off value from the caller is refused; a run
// finished with that step stopped there (its Begins refused, never begun)
// after the triage landed is not VERIFIED (*RunNotVerified).
func TestRunRefusalsAndNotVerified(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	ctx := t.Context()
	run := visit(t, cl, "r2")
	ran := false
	err := run.Step(ctx, "follow_up", nil, func(context.Context) error { ran = true; return nil })
	var refused *client.Refused
	if !errors.As(err, &refused) || ran || !strings.Contains(refused.Rule+refused.Message, "step_out_of_order") {
		t.Fatalf("follow_up first = %v (action ran: %v), want *Refused step_out_of_order", err, ran)
	}
	var triage int64
	if err := run.Step(ctx, "triage", map[string]string{"note": "cough"}, func(context.Context) error {
		triage = c.insert(t, "r2", "Triage", "cough")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Begin(ctx, "follow_up", map[string]string{"triage_id": fmt.Sprint(triage)}); err == nil || !strings.Contains(err.Error(), "triage_id") {
		t.Fatalf("follow_up with the caller's triage_id = %v, want a refusal naming triage_id", err)
	}
	res, err := run.Finish(ctx)
	var nv *client.RunNotVerified
	if !errors.As(err, &nv) || nv.Run != res || res.Outcome != client.ReconciliationRequired || res.Attempt != 1 {
		t.Fatalf("Finish = %+v, %v; want *RunNotVerified, RECONCILIATION_REQUIRED", res, err)
	}
	reasons := []string{}
	for _, r := range res.Reasons {
		reasons = append(reasons, r.Code)
	}
	if strings.Join(reasons, ",") != "step_refused" || !strings.Contains(err.Error(), "step_refused") {
		t.Errorf("reasons %v (%v), want step_refused", reasons, err)
	}
	if _, err := cl.GetRun(ctx, "run-nope"); status.Code(err) != codes.NotFound {
		t.Errorf("GetRun of an unknown run = %v, want NotFound", err)
	}
}

// TestRunRollbackCheck: a save still there is listed; once undone the run
// is sealed ROLLED_BACK_VERIFIED with a run receipt.
func TestRunRollbackCheck(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	ctx := t.Context()
	run := visit(t, cl, "r3")
	var triage int64
	if err := run.Step(ctx, "triage", map[string]string{"note": "rash"}, func(context.Context) error {
		triage = c.insert(t, "r3", "Triage", "rash")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rb, err := cl.RollbackCheck(ctx, run.ID)
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Step != "triage" || rb.Remains[0].SessionID == "" {
		t.Fatalf("RollbackCheck with the save there = %+v, %v", rb, err)
	}
	if _, err := c.db.Exec(`DELETE FROM encounters WHERE id = ?`, triage); err != nil {
		t.Fatal(err)
	}
	rb, err = cl.RollbackCheck(ctx, run.ID)
	if err != nil || !rb.RolledBack || len(rb.Remains) != 0 || rb.Run.Outcome != client.RolledBackVerified || len(rb.Run.Receipt) == 0 {
		t.Fatalf("RollbackCheck after undoing = %+v, %v; want ROLLED_BACK_VERIFIED", rb, err)
	}
}

// TestRunReceiptOfAnotherKey: a client that pins another key refuses the
// run's receipt (*ReceiptError naming the run).
func TestRunReceiptOfAnotherKey(t *testing.T) {
	c := startClinic(t, "")
	other, _, _ := ed25519.GenerateKey(nil)
	cl, err := client.Dial(c.addr, client.WithReceiptKey(other))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	run := visit(t, cl, "r4")
	_, err = run.Finish(t.Context())
	var re *client.ReceiptError
	if !errors.As(err, &re) || re.Run == nil || re.Run.RunID != run.ID || !strings.Contains(err.Error(), "run "+run.ID) {
		t.Fatalf("Finish under another key = %v, want *ReceiptError about the run", err)
	}
}

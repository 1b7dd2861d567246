package client_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/client"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

func triage(patient, note string) client.Request {
	return client.Request{Deployment: "clinic", Workflow: "triage", Step: "save_triage",
		Params: map[string]string{"patient_id": patient, "note": note}}
}

func dial(t *testing.T, c *clinic, opts ...client.Option) *client.Client {
	t.Helper()
	cl, err := client.Dial(c.addr, append([]client.Option{client.WithReceiptKey(c.pub)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestStepVerified: the action saves the one triage encounter; Step
// returns nil, the action saw its session, and Begin and Verify alone give
// a result whose receipt checks against the daemon's key and the subject.
func TestStepVerified(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	ctx := t.Context()
	var seen *client.Session
	err := cl.Step(ctx, triage("p1", "follow-up"), func(ctx context.Context) error {
		seen, _ = client.SessionFrom(ctx)
		return c.save("p1", "follow-up")(ctx)
	})
	if err != nil {
		t.Fatalf("Step = %v, want nil", err)
	}
	if seen == nil || seen.ID == "" || len(seen.Effects) != 2 || seen.Effects[0].Candidate != "sql" || seen.Effects[0].Tier != 1 {
		t.Fatalf("the action's session = %+v, want a session with two effects pinned to sql (tier 1)", seen)
	}
	if seen.RegisteredStep == nil || seen.RegisteredStep.Step != "save_triage" || seen.RegisteredStep.Workflow != "triage" {
		t.Fatalf("registered step = %+v, want triage/save_triage", seen.RegisteredStep)
	}
	// Verifying a finished session again returns the recorded result.
	res, err := cl.Verify(ctx, seen)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != client.Verified || res.TerminalOutcome != client.Verified || len(res.Effects) != 2 || len(res.Tasks()) != 0 {
		t.Fatalf("result = %+v, want VERIFIED, two effects, no task", res)
	}
	e := res.Effects[0]
	if e.Verdict != "CONFIRMED" || e.Class != "confirmed" || e.ObservedCount == nil || *e.ObservedCount != 1 || len(e.MatchedRecords) != 1 || e.Substrate != "sql" || e.OracleRung != 2 {
		t.Fatalf("effect 0 = %+v, want CONFIRMED/confirmed, 1 observed and matched, substrate sql", e)
	}
	payload, err := res.CheckReceipt(c.pub, receipt.Expect{Session: seen.ID, Deployment: "clinic", Step: "save_triage"})
	if err != nil || len(payload) == 0 {
		t.Fatalf("CheckReceipt = %v, want the signed payload", err)
	}
	var sub *receipt.SubjectError
	if _, err := res.CheckReceipt(c.pub, receipt.Expect{Session: seen.ID, Step: "another_step"}); !errors.As(err, &sub) || sub.Field != "step" {
		t.Fatalf("CheckReceipt of another step = %v, want a *receipt.SubjectError on step", err)
	}
	key, err := cl.SigningKey(ctx)
	if err != nil || !key.Equal(c.pub) {
		t.Fatalf("SigningKey = %x, %v; want the daemon's key", key, err)
	}
}

// TestStepNotConfirmed: nothing saved is HALTED_BEFORE_EFFECT, a double
// save RECONCILIATION_REQUIRED; both are a *NotConfirmed holding the
// result and its tasks.
func TestStepNotConfirmed(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	cases := []struct {
		name    string
		action  func(context.Context) error
		outcome client.Outcome
		action0 string // the first task's suggested action
	}{
		{"nothing saved", func(context.Context) error { return nil }, client.HaltedBeforeEffect, "REVERIFY_BEFORE_RETRY"},
		{"saved twice", func(ctx context.Context) error {
			if err := c.save("p3", "n")(ctx); err != nil {
				return err
			}
			return c.save("p3", "n")(ctx)
		}, client.ReconciliationRequired, "REMOVE_DUPLICATES"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			patient := []string{"p2", "p3"}[i]
			err := cl.Step(t.Context(), triage(patient, "n"), tc.action)
			nc, ok := errors.AsType[*client.NotConfirmed](err)
			if !ok {
				t.Fatalf("Step = %v, want *NotConfirmed", err)
			}
			if nc.Result.Outcome != tc.outcome {
				t.Fatalf("outcome = %s, want %s", nc.Result.Outcome, tc.outcome)
			}
			tasks := nc.Result.Tasks()
			if len(tasks) == 0 || tasks[0].SuggestedAction != tc.action0 || tasks[0].ID == "" {
				t.Fatalf("tasks = %+v, want a task suggesting %s", tasks, tc.action0)
			}
		})
	}
}

// TestStepRefused: a Begin the policy refuses (caller-sent effects where
// registered contracts are required) is a *Refused naming the rule, and
// the action never runs.
func TestStepRefused(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	ran := false
	req := client.Request{Deployment: "clinic", Params: map[string]string{"patient_id": "p4"},
		Effects: []byte(`[{"kind": "record_written", "match": {"patient_id": {"param": "patient_id"}}, "expected_count": 1, "count_new_only": true}]`)}
	err := cl.Step(t.Context(), req, func(context.Context) error { ran = true; return nil })
	ref, ok := errors.AsType[*client.Refused](err)
	if !ok {
		t.Fatalf("Step = %v, want *Refused", err)
	}
	if ran {
		t.Fatal("the action ran after a refused Begin")
	}
	if ref.Code != codes.PermissionDenied || ref.Rule != "registered_contracts_required" || status.Code(err) != codes.PermissionDenied {
		t.Fatalf("refusal = %+v (status %s), want PermissionDenied, rule registered_contracts_required", ref, status.Code(err))
	}
	// An unknown deployment is not a refusal: the status error as it is.
	_, err = cl.Begin(t.Context(), client.Request{Deployment: "nowhere", Workflow: "triage", Step: "save_triage"})
	if _, ok := errors.AsType[*client.Refused](err); ok || err == nil {
		t.Fatalf("Begin of an unknown deployment = %v, want a status error that is not *Refused", err)
	}
	for name, bad := range map[string]client.Request{
		"no deployment":     {Workflow: "triage", Step: "save_triage"},
		"two deployments":   {Deployment: "clinic", DeploymentYAML: []byte("effects: {kind: sql}\n"), Workflow: "triage", Step: "save_triage"},
		"a workflow alone":  {Deployment: "clinic", Workflow: "triage"},
		"a step, no source": {Deployment: "clinic", Step: "save_triage"},
	} {
		if _, err := cl.Begin(t.Context(), bad); err == nil || status.Code(err) != codes.Unknown {
			t.Errorf("Begin with %s = %v, want the client's own refusal before any call", name, err)
		}
	}
	if _, err := cl.Verify(t.Context(), &client.Session{}); err == nil {
		t.Error("Verify of no session: want an error")
	}
}

// TestStepActionFails: an action that fails after its write is still
// verified; the error unwraps to the action's and carries the result.
func TestStepActionFails(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	boom := errors.New("the page timed out after Save")
	err := cl.Step(t.Context(), triage("p5", "n"), func(ctx context.Context) error {
		if err := c.save("p5", "n")(ctx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Step = %v, want the action's error", err)
	}
	ae, ok := errors.AsType[*client.ActionError](err)
	if !ok || ae.Result == nil || ae.Result.Outcome != client.Verified || ae.VerifyErr != nil {
		t.Fatalf("ActionError = %+v, want the VERIFIED result of the write that landed", ae)
	}
	// The caller's context ends during the action: the session is
	// verified all the same.
	ctx, cancel := context.WithCancel(t.Context())
	err = cl.Step(ctx, triage("p10", "n"), func(ctx context.Context) error {
		if err := c.save("p10", "n")(ctx); err != nil {
			return err
		}
		cancel()
		return ctx.Err()
	})
	ae, ok = errors.AsType[*client.ActionError](err)
	if !errors.Is(err, context.Canceled) || !ok || ae.Result == nil || ae.Result.Outcome != client.Verified {
		t.Fatalf("Step cancelled during the action = %v (%+v), want context.Canceled with the VERIFIED result", err, ae)
	}
}

// TestStepActionPanics: a panicking action is verified before the panic
// goes on: the daemon holds the session's result.
func TestStepActionPanics(t *testing.T) {
	c := startClinic(t, "")
	cl := dial(t, c)
	var id string
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the action's panic did not go on")
			}
		}()
		_ = cl.Step(t.Context(), triage("p6", "n"), func(ctx context.Context) error {
			s, _ := client.SessionFrom(ctx)
			id = s.ID
			panic("the automation crashed")
		})
	}()
	got, err := cl.API().GetSession(t.Context(), &verifierv1.GetSessionRequest{SessionId: id})
	if err != nil || got.GetState() != verifierv1.SessionState_verified {
		t.Fatalf("session after the panic: %v, %v; want it verified", got.GetState(), err)
	}
}

// TestReceiptFromAnotherKey: a receipt not signed by the pinned key is a
// *ReceiptError, never a result.
func TestReceiptFromAnotherKey(t *testing.T) {
	c := startClinic(t, "")
	other := startClinic(t, "")
	cl := dial(t, c, client.WithReceiptKey(other.pub))
	err := cl.Step(t.Context(), triage("p7", "n"), c.save("p7", "n"))
	re, ok := errors.AsType[*client.ReceiptError](err)
	if !ok || !errors.Is(err, receipt.ErrNoSignature) || re.Result.Outcome != client.Verified {
		t.Fatalf("Step = %v, want a *ReceiptError (no signature by the key) over the VERIFIED result", err)
	}
}

// TestToken: the bearer token comes from the named environment variable;
// without it the daemon answers Unauthenticated, and Dial refuses an unset
// variable and a plaintext token to a non-loopback address.
func TestToken(t *testing.T) {
	c := startClinic(t, "s3cret")
	t.Setenv("CLIENT_TEST_TOKEN", "s3cret")
	t.Setenv("CLIENT_TEST_WRONG", "nope")
	err := dial(t, c, client.WithTokenEnv("CLIENT_TEST_TOKEN")).Step(t.Context(), triage("p8", "n"), c.save("p8", "n"))
	if err != nil {
		t.Fatalf("Step with the token = %v, want nil", err)
	}
	for _, opt := range []client.Option{client.WithTokenEnv("CLIENT_TEST_WRONG"), client.WithDialOptions()} {
		_, err := dial(t, c, opt).Begin(t.Context(), triage("p9", "n"))
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("Begin with a wrong or no token = %v, want Unauthenticated", err)
		}
	}
	if _, err := client.Dial(c.addr, client.WithTokenEnv("CLIENT_TEST_UNSET")); err == nil {
		t.Fatal("Dial with an unset token variable: want an error naming it")
	}
	if _, err := client.Dial("192.0.2.1:7443", client.WithTokenEnv("CLIENT_TEST_TOKEN")); err == nil {
		t.Fatal("Dial sending a plaintext token off loopback: want a refusal")
	}
	if _, err := client.Dial("192.0.2.1:7443", client.WithTokenEnv("CLIENT_TEST_TOKEN"), client.WithInsecure()); err != nil {
		t.Fatalf("Dial with WithInsecure = %v, want it allowed", err)
	}
}

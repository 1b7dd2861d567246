package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/verifierd/verifierd/client"
	"github.com/verifierd/verifierd/receipt"
)

// saveTriageNote stands for the automation's action: the write whose
// landing the daemon judges.
func saveTriageNote(ctx context.Context) error { return nil }

// Step wraps the action: Begin, the action, Verify, and an error unless
// the outcome is VERIFIED.
func Example() {
	// The key `verifyctl key` printed, as the operator publishes it.
	text, err := os.ReadFile("receipt-key.pub")
	if err != nil {
		log.Fatal(err)
	}
	pub, err := receipt.ParsePublicKey(strings.TrimSpace(string(text)))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial("127.0.0.1:7443", client.WithTokenEnv("VERIFIERD_TOKEN"), client.WithReceiptKey(pub))
	if err != nil {
		log.Fatal(err)
	}
	req := client.Request{Deployment: "clinic", Workflow: "triage", Step: "save_triage",
		Params: map[string]string{"patient_id": "p1", "note": "Follow-up"}}
	err = c.Step(context.Background(), req, saveTriageNote)
	c.Close()
	var refused *client.Refused
	var notConfirmed *client.NotConfirmed
	switch {
	case err == nil:
		fmt.Println("saved and verified; go on")
	case errors.As(err, &refused):
		fmt.Println("not allowed, nothing done:", refused.Rule)
	case errors.As(err, &notConfirmed):
		for _, t := range notConfirmed.Result.Tasks() {
			fmt.Println("reconcile:", t.ID, t.SuggestedAction)
		}
	default:
		log.Fatal(err)
	}
}

// Begin and Verify separately, when the action cannot be wrapped in a
// function (it runs in another process, or across a restart: keep the
// session id, and verify &client.Session{ID: id, Deployment: "clinic"}).
func ExampleClient_Verify() {
	c, err := client.Dial("127.0.0.1:7443")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	s, err := c.Begin(ctx, client.Request{Deployment: "clinic", Workflow: "triage", Step: "save_triage",
		Params: map[string]string{"patient_id": "p1", "note": "Follow-up"}})
	if err != nil {
		log.Print(err) // a *client.Refused: do not act
		return
	}
	if err := saveTriageNote(ctx); err != nil {
		log.Print(err) // verify anyway: the action may have partly happened
	}
	res, err := c.Verify(ctx, s)
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Println(res.Outcome, len(res.Tasks()))
}

// A receipt kept from a result can be checked later, offline.
func ExampleResult_CheckReceipt() {
	var res *client.Result // from Verify
	var pub []byte         // the daemon's receipt key
	payload, err := res.CheckReceipt(pub, receipt.Expect{Session: res.SessionID, Deployment: "clinic", Step: "save_triage"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", payload)
}

// A run is a whole process, one workflow against one deployment: each
// step begins in the run (the daemon refuses a step out of order, a
// handed-off value the caller made up, a consumer before its artifact is
// confirmed), and Finish seals the run with one outcome and a signed run
// receipt. A step's VERIFIED only lets the run go on; Finish answers for
// the whole run.
func ExampleClient_BeginRun() {
	c, err := client.Dial("127.0.0.1:7443")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	run, err := c.BeginRun(ctx, client.RunRequest{Workflow: "claims", Deployment: "ledger",
		Params: map[string]string{"patient_id": "p1"}})
	if err != nil {
		log.Print(err)
		return
	}
	// intake's record id reaches posting from the record intake's
	// effect matched, never from the caller (a handoff of the workflow).
	for _, step := range []string{"intake", "posting"} {
		if err := run.Step(ctx, step, nil, saveTriageNote); err != nil {
			log.Print(err) // *client.Refused, *client.NotConfirmed, …: stop here
			break
		}
	}
	res, err := run.Finish(ctx)
	var notVerified *client.RunNotVerified
	switch {
	case err == nil:
		fmt.Println("the whole run is verified:", res.RunID, res.Attempt)
	case errors.As(err, &notVerified):
		for _, r := range notVerified.Run.Reasons {
			fmt.Println(notVerified.Run.Outcome, r.Code, r.Message)
		}
	default:
		log.Print(err)
	}
}

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

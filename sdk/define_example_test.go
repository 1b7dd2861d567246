package sdk_test

import (
	"context"
	"fmt"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// config is the adapter's section as written.
type config struct {
	Payee string `json:"payee"`
}

// settings are what configure resolved; they probe and read.
type settings struct{ payee string }

func configure(_ context.Context, cfg config, _ sdk.ConfigureRequest) (*settings, error) {
	if cfg.Payee == "" {
		return nil, &refusal.Error{Path: "payee", Message: "missing: name the payee whose payments are read"}
	}
	return &settings{payee: cfg.Payee}, nil
}

func (s *settings) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "the ledger of " + s.payee + " is readable"}, nil
}

func (s *settings) Read(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": "p-1", "payee": s.payee})}, nil
}

// An adapter is its Info and a configure function whose settings read: the
// SDK decodes the section strictly, holds the settings for concurrent
// calls and answers Info, CaptureBefore and CaptureAfter.
func ExampleDefine() {
	newLedger := sdk.Define(sdk.Info{Kind: "ledger", Tier: sdk.TierIndependentSystem}, configure)
	a := newLedger() // what plugin.Main(newLedger) serves
	ctx := context.Background()

	err := a.Configure(ctx, sdk.ConfigureRequest{Config: []byte(`{"payee": "ACME", "payer": "x"}`)})
	fmt.Println(err)

	if err := a.Configure(ctx, sdk.ConfigureRequest{Config: []byte(`{"payee": "ACME"}`)}); err != nil {
		panic(err)
	}
	res, _ := a.TestConnection(ctx, sdk.TestRequest{})
	fmt.Println(res.Reachable, res.Message)
	c, _ := a.CaptureAfter(ctx, sdk.CaptureRequest{})
	for r, err := range c.Records {
		if err != nil {
			panic(err)
		}
		fmt.Println(r["id"], r["payee"])
	}
	// Output:
	// payer: unknown key for kind ledger; "payer" is not one of: payee (did you mean "payee"?)
	// true the ledger of ACME is readable
	// p-1 ACME
}

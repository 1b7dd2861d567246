package plugin_test

import (
	"context"
	"fmt"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
)

// ledger is the smallest adapter: one fixed record per read, for the
// example's run parameter.
type ledger struct{}

func (ledger) Info() sdk.Info {
	return sdk.Info{Kind: "ledger", Tier: sdk.TierIndependentSystem, Description: "example ledger"}
}
func (ledger) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (ledger) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (l ledger) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return l.CaptureAfter(ctx, req)
}
func (ledger) CaptureAfter(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": "1", "payee": req.Params["payee"]})}, nil
}

// A plugin binary's main serves its adapter's factory; the daemon starts
// the binary and calls the factory once per configured instance. Started
// by hand, without the daemon's handshake, Serve returns at once.
func ExampleServe() {
	err := plugin.Serve(func() sdk.Adapter { return ledger{} },
		plugin.WithMaxMessageBytes(16<<20), // records of up to a few MiB each
		plugin.WithDebug(),                 // log at debug level
	)
	if err != nil {
		fmt.Println(err)
	}
	// Output: this binary is a verifierd adapter plugin: the daemon starts it; running it by hand does nothing (put it in the daemon's plugin dir)
}

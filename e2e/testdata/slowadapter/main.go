// Command slowadapter is a test-only adapter (kind "slow") that streams its
// records slowly and touches a marker file when an after read starts, so that
// an end-to-end test can kill the plugin process in the middle of a capture.
// The process death is real; only the system of record is made up, because
// no real server can be paused mid-stream on cue.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
)

type options struct {
	Records int    `json:"records"`
	DelayMS int    `json:"delay_ms"`
	Marker  string `json:"marker"`
}

type adapter struct{ opts options }

func (a *adapter) Info() sdk.Info {
	return sdk.Info{Kind: "slow", Tier: sdk.TierIndependentSystem, Description: "test adapter that streams slowly"}
}

func (a *adapter) Configure(_ context.Context, req sdk.ConfigureRequest) error {
	var cfg struct {
		Kind    string  `json:"kind"`
		Options options `json:"options"`
	}
	if err := req.DecodeConfig(&cfg); err != nil {
		return err
	}
	a.opts = cfg.Options
	return nil
}

func (a *adapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "slow test adapter"}, nil
}

// records streams the rows. The first after read pauses half-way, after
// more than one batch has gone out, creating the marker there; later reads
// (the marker exists) run straight through.
func (a *adapter) records(after bool) sdk.Capture {
	n := a.opts.Records
	src := func(yield func(sdk.Record, error) bool) {
		for i := range n {
			if after && i == n/2 && a.opts.Marker != "" {
				if _, err := os.Stat(a.opts.Marker); err != nil {
					// The marker names this process, so that the test kills
					// exactly the adapter serving the capture.
					os.WriteFile(a.opts.Marker, []byte(strconv.Itoa(os.Getpid())), 0o600)
					time.Sleep(time.Duration(a.opts.DelayMS) * time.Millisecond)
				}
			}
			if !yield(sdk.Record{"id": json.Number(itoa(i + 1)), "kind": "row"}, nil) {
				return
			}
		}
	}
	return sdk.Capture{Reachable: true, At: time.Now(), Records: src}
}

func (a *adapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.records(false), nil
}

func (a *adapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.records(true), nil
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func main() {
	if err := plugin.Serve(func() sdk.Adapter { return &adapter{} }); err != nil {
		log.Fatal(err)
	}
}

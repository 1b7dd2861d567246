package host_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// BenchmarkCaptureThroughPlugin streams a synthetic read set from a plugin
// subprocess and reports records per second, decoded (Batches) and raw
// (RawBatches).
func BenchmarkCaptureThroughPlugin(b *testing.B) {
	const n = 100_000
	for _, decode := range []bool{false, true} {
		name := "raw"
		if decode {
			name = "decoded"
		}
		b.Run(name, func(b *testing.B) {
			p := startB(b)
			req := synthetic("many", "count", strconv.Itoa(n))
			b.ResetTimer()
			for range b.N {
				c, err := p.CaptureAfter(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				if decode {
					for batch, err := range c.Batches() {
						if err != nil {
							b.Fatal(err)
						}
						got += len(batch)
					}
				} else {
					for batch, err := range c.RawBatches() {
						if err != nil {
							b.Fatal(err)
						}
						got += len(batch)
					}
				}
				if got != n {
					b.Fatalf("got %d records", got)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// manyAdapter generates n records per capture, like the test plugin's
// "many" mode, for in-process benchmarks.
type manyAdapter struct {
	endless
	n int
}

func (a manyAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: func(yield func(sdk.Record, error) bool) {
		for i := range a.n {
			r := sdk.Record{"id": int64(i), "exact": json.Number("12345678901234567890.5"), "name": "row " + strconv.Itoa(i)}
			if !yield(r, nil) {
				return
			}
		}
	}}, nil
}

// BenchmarkCaptureInProcess is the same stream without the process
// boundary and TLS.
func BenchmarkCaptureInProcess(b *testing.B) {
	const n = 100_000
	p := adaptertest.Configured(b, func() sdk.Adapter { return manyAdapter{n: n} }, sdk.ConfigureRequest{}, nil)
	b.ResetTimer()
	for range b.N {
		c, err := p.CaptureAfter(b.Context(), sdk.CaptureRequest{})
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for batch, err := range c.RawBatches() {
			if err != nil {
				b.Fatal(err)
			}
			got += len(batch)
		}
		if got != n {
			b.Fatalf("got %d records", got)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

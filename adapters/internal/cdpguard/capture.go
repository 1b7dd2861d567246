package cdpguard

import (
	"context"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/deadline"
	"github.com/verifierd/verifierd/sdk"
)

// Capture answers a capture with one read of a page. read runs under the
// daemon's deadline for the capture, which ctx carries (for a baseline it
// is longer than the effect's timeout_s; req.Timeout only stands in when a
// caller set none). It returns the records, or why the read is unusable,
// and when it was taken; its error is for the adapter's own faults. An
// unusable read is an unreachable capture whose reason starts with surface
// ("on-screen read-back").
func Capture(ctx context.Context, req sdk.CaptureRequest, surface string, read func(context.Context) (records []sdk.Record, unusable string, at time.Time, err error)) (sdk.Capture, error) {
	if _, ok := ctx.Deadline(); !ok && req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	start := time.Now()
	records, unusable, at, err := read(ctx)
	if err != nil {
		return sdk.Capture{}, err
	}
	log := sdk.Logger(ctx)
	if unusable != "" {
		log.Info(surface+" unusable", "capture", req.CaptureID, "took", time.Since(start).String(), "reason", unusable)
		return sdk.Capture{Reason: surface + ": " + unusable, At: at}, nil
	}
	log.Debug(surface, "capture", req.CaptureID, "records", len(records), "took", time.Since(start).String())
	return sdk.Capture{Reachable: true, At: at, Records: sdk.Records(records...)}, nil
}

// ReadDeadline bounds one read to budget from now, and always a little
// inside ctx's deadline (deadline.Within), so that a timeout is answered as
// an unusable read rather than a cut-off call.
func ReadDeadline(ctx context.Context, budget time.Duration) time.Time {
	return deadline.Within(ctx, budget)
}

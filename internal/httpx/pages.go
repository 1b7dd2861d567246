package httpx

import (
	"context"
	"errors"
	"time"

	"github.com/verifierd/verifierd/sdk"
)

// Pages is the capture of a read of one or more pages, bounded by the
// capture's timeout. fetch reads the next page: its records, whether
// another page follows, or why the read failed. The first page is read
// before the capture answers, so a read that fails there is unreachable;
// later pages are read while the records stream, and a failure there
// aborts the stream, so a partial result is never judged. done, when not
// nil, checks the whole read after its last page; its error aborts the
// stream too.
func Pages(ctx context.Context, timeout time.Duration, fetch func(context.Context) (recs []sdk.Record, more bool, why string), done func() error) sdk.Capture {
	ctx, cancel := WithTimeout(ctx, timeout)
	at := time.Now()
	recs, more, why := fetch(ctx)
	if why != "" {
		cancel()
		return sdk.Unreachable("%s", why)
	}
	if !more {
		cancel() // nothing more is read
	}
	return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
		defer cancel()
		for {
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
			if !more {
				break
			}
			if recs, more, why = fetch(ctx); why != "" {
				yield(nil, errors.New(why))
				return
			}
		}
		if done != nil {
			if err := done(); err != nil {
				yield(nil, err)
			}
		}
	}}
}

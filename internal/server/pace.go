package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MessagePace is how fast an authenticated call's request message must
// arrive once the call asks for it: the --min-body-rate an HTTP body must
// keep up, over gRPC. gRPC (grpc-go) hands a call its message only once
// the whole of it is in, so its progress cannot be seen as it arrives:
// the whole message must be in within Grace plus the time its method's
// largest message (MethodLimit) takes at MinRate (Within). A call whose
// message is not in by then is cut: its context ends, which stops gRPC's
// read and gives its hold back to the budget at once, and the call is
// answered DeadlineExceeded naming the flag. MinRate 0 cuts nothing.
type MessagePace struct {
	// MinRate is the bytes a second (--min-body-rate); 0: no minimum.
	MinRate int64
	// Grace is the time every message has before the rate applies.
	Grace time.Duration
}

// Within is how long a message of method has to arrive whole once its
// call asks for it: Grace, plus MethodLimit(method) bytes at MinRate
// (0 when MinRate is 0: no bound).
func (p MessagePace) Within(method string) time.Duration {
	if p.MinRate <= 0 {
		return 0
	}
	return p.Grace + time.Duration(float64(MethodLimit(method))/float64(p.MinRate)*float64(time.Second))
}

// errTooSlow is the cause a pacer ends a call's context with.
var errTooSlow = errors.New("the request message arrived too slowly (--min-body-rate)")

// paceKey carries a call's pacer from tapIn to vetted and budgetedStream.
type paceKey struct{}

// pacer can end one call's context (the one tapIn made, which gRPC reads
// the call's message under) when its message is late.
type pacer struct {
	pace   MessagePace
	cancel context.CancelCauseFunc
}

// withPacer gives a call's context (tapIn's) an end of its own and the
// pacer that ends it, when pace has a minimum rate.
func withPacer(ctx context.Context, pace MessagePace) context.Context {
	if pace.MinRate <= 0 {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return context.WithValue(ctx, paceKey{}, &pacer{pace: pace, cancel: cancel})
}

// paced runs recv, the read of one message of method on a call whose
// context is ctx, within the call's pacer's bound (MessagePace.Within):
// when the message is not in by then, the call is cut (pacer.cut) and
// paced is DeadlineExceeded naming --min-body-rate, whatever recv
// returned. A call without a pacer reads unbounded.
func paced(ctx context.Context, method string, recv func() error) error {
	p, _ := ctx.Value(paceKey{}).(*pacer)
	if p == nil {
		return recv()
	}
	timer := time.AfterFunc(p.pace.Within(method), func() { p.cut(ctx, p.late(method)) })
	err := recv()
	if !timer.Stop() || errors.Is(context.Cause(ctx), errTooSlow) {
		return p.late(method).Err()
	}
	return err
}

// late is the status of a call of method cut for its late message (made
// only then: paced runs on every call).
func (p *pacer) late(method string) *status.Status {
	return status.New(codes.DeadlineExceeded, fmt.Sprintf(
		"the %s request message was not in within %s: %d bytes a second (--min-body-rate) for the %d bytes that method takes, after the first %s; send the message at once",
		method, p.pace.Within(method), p.pace.MinRate, MethodLimit(method), p.pace.Grace))
}

// statusWriter is gRPC's transport stream of a call (grpc-go's
// transport.ServerStream), which can end the call with a status.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// cut ends a call whose message is late: its trailers carry st at once
// (gRPC's read would otherwise fail first and answer the call Canceled,
// "context canceled", before the handler could say why), which also
// resets the stream and ends its context; then the pacer's own context
// ends, which stops gRPC's read and gives the call's hold back to the
// budget even where the stream could not be written.
func (p *pacer) cut(ctx context.Context, st *status.Status) {
	if w, ok := grpc.ServerTransportStreamFromContext(ctx).(statusWriter); ok {
		_ = w.WriteStatus(st)
	}
	p.cancel(errTooSlow)
}

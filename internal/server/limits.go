package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/verifierd/verifierd/internal/connlimit"
	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/session"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// What one call may make gRPC buffer, and its per-method bounds. gRPC
// (grpc-go) checks a message's 5-byte length prefix against one bound for
// the whole server (grpc.MaxRecvMsgSize: MaxReceiveBytes) before it asks
// the client for the message's bytes, and has no per-method bound there;
// each method's own bound (MethodLimit) is checked by the codec on the
// received buffers, before they are copied into one piece or decoded
// (wireCodec). Until a call asks for its message, its stream may buffer
// StreamWindowBytes (HTTP/2 flow control); once it asks, what the prefix
// declares, at most MaxReceiveBytes.
const (
	// MaxReceiveBytes is gRPC's bound on any one received message, checked
	// on its length prefix before any of its bytes are asked for.
	MaxReceiveBytes = session.MaxRequestBytes
	// StreamWindowBytes is each call's HTTP/2 flow-control window: what a
	// client may send on a stream, and the daemon buffer for it, before
	// the call reads its message (grpc.InitialWindowSize).
	StreamWindowBytes = 64 << 10
	// ConnWindowBytes is a connection's HTTP/2 flow-control window
	// (grpc.InitialConnWindowSize). gRPC gives it back as bytes arrive,
	// not as calls read them, so it bounds bytes on the wire, not bytes
	// buffered: the streams' windows bound those.
	ConnWindowBytes = 16 << 20
	// MaxHeaderBytes bounds a call's headers (grpc.MaxHeaderListSize),
	// which gRPC reads whole before the tap checks the token, as the HTTP
	// listener bounds a request's.
	MaxHeaderBytes = 64 << 10
	// MaxRewardRequestBytes bounds a RegisterEpisode or ScoreEpisode
	// request, as the HTTP listener bounds their bodies (httpapi.MaxBodyBytes).
	MaxRewardRequestBytes = 1 << 20
	// MaxSmallRequestBytes bounds the requests that carry ids and little
	// else (Verify, GetSession, GetRun, ...), and any method not named in
	// methodLimits.
	MaxSmallRequestBytes = 64 << 10
)

// methodLimits are the methods that take more than MaxSmallRequestBytes.
var methodLimits = map[string]int64{
	verifierv1.VerifierService_TestConnection_FullMethodName: session.MaxRequestBytes,
	verifierv1.VerifierService_Begin_FullMethodName:          session.MaxRequestBytes,
	verifierv1.VerifierService_Judge_FullMethodName:          session.MaxRequestBytes,
	verifierv1.VerifierService_VerifyArtifact_FullMethodName: session.MaxRequestBytes,
	verifierv1.VerifierService_BeginRun_FullMethodName:       session.MaxRequestBytes,
	verifierv1.RewardService_RegisterEpisode_FullMethodName:  MaxRewardRequestBytes,
	verifierv1.RewardService_ScoreEpisode_FullMethodName:     MaxRewardRequestBytes,
}

// MethodLimit is the most bytes one request message of the method (a full
// method name, /package.Service/Method) may have: session.MaxRequestBytes
// (16 MiB) for the methods that carry documents or reads (Begin, Judge,
// TestConnection, VerifyArtifact, BeginRun), 1 MiB for RegisterEpisode
// and ScoreEpisode, and 64 KiB for every other call (the id-only ones,
// GetInfo, the ledger export and server reflection), so that a stream
// that stays open holds no more of the budget than that.
func MethodLimit(method string) int64 {
	if n, ok := methodLimits[method]; ok {
		return n
	}
	return MaxSmallRequestBytes
}

// holdKey carries a call's budget hold from tapIn to vetted.
type holdKey struct{}

// tapIn is the first look at every call, from the connection's reading
// goroutine, before any byte of its message is read: a call without the
// bearer token (health checks aside) is refused Unauthenticated there, so
// a client without it never makes the daemon hold a message. An
// authenticated call marks its connection so (connlimit) and holds its
// stream's window (StreamWindowBytes, what the stream may buffer before
// the call reads its message) from the budget, without waiting: a spent
// budget refuses the call with ResourceExhausted at once. vetted grows the
// hold before the message is read (receiveHold) and sizes it to the
// message once it has arrived; the hold is released when the call ends,
// or when its message arrives slower than pace allows (withPacer, paced).
func tapIn(token string, budget *inflight.Budget, pace MessagePace) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if exempt(info.FullMethodName) {
			return ctx, nil
		}
		if err := tokenIn(info.Header, token); err != nil {
			return nil, err
		}
		connlimit.MarkAuthenticated(ctx)
		hold, err := budget.TryHold(capped(budget, StreamWindowBytes))
		if err != nil {
			return nil, err
		}
		ctx = withPacer(ctx, pace)
		context.AfterFunc(ctx, hold.Release)
		return context.WithValue(ctx, holdKey{}, hold), nil
	}
}

// capped is n, at most budget's whole limit.
func capped(budget *inflight.Budget, n int64) int64 {
	if l := budget.Limit(); l > 0 {
		return min(n, l)
	}
	return n
}

// tokenIn checks the bearer token among a call's headers.
func tokenIn(md metadata.MD, token string) error {
	return checkToken(metadata.NewIncomingContext(context.Background(), md), token)
}

// receiveHold grows a call's hold, before its message is read, to what
// gRPC may then receive for it: MaxReceiveBytes, whatever the method,
// since gRPC checks only that bound before the bytes arrive. It waits for
// room as an HTTP body does (the call's context, at most
// inflight.MaxWait), then is ResourceExhausted. Once the message is in,
// holdMessage sizes the hold to it. A call without a hold from tapIn (no
// budget) holds nothing here.
//
// The hold is at most half the budget: every waiting call keeps its
// stream's window held, and a grow to the whole budget could never be
// had while any other call holds a window (each would wait out MaxWait).
// So with a budget under 2 x MaxReceiveBytes a message larger than half
// of it is received beyond its hold (and refused, or held whole, once it
// is in).
func receiveHold(ctx context.Context, hold *inflight.Hold) error {
	if hold == nil {
		return nil
	}
	n := int64(MaxReceiveBytes)
	if compressed(ctx) {
		// The compressed bytes and the message gRPC inflates from them,
		// each at most MaxReceiveBytes, are alive together.
		n *= 2
	}
	if l := hold.Budget().Limit(); l > 0 {
		n = min(n, l/2)
	}
	err := hold.Resize(ctx, n)
	if _, isStatus := status.FromError(err); err != nil && !isStatus {
		err = status.Error(codes.ResourceExhausted, err.Error())
	}
	return err
}

// compressed reports whether the call's client compressed its messages
// (grpc-encoding other than identity).
func compressed(ctx context.Context) bool {
	ts, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ RecvCompress() string })
	if !ok {
		return false
	}
	c := ts.RecvCompress()
	return c != "" && c != "identity"
}

// holdMessage holds a unary call's message that has arrived (the codec
// has checked it against its method's bound): the call's hold (from
// tapIn, or a new one from budget) is made exactly the message's size,
// waiting for room as the budget does when it grows. release gives it
// back.
func holdMessage(ctx context.Context, hold *inflight.Hold, budget *inflight.Budget, size int) (release func(), err error) {
	if hold == nil {
		if hold, err = budget.Hold(ctx, 0); err != nil {
			return nil, err
		}
	}
	if err := hold.Resize(ctx, int64(size)); err != nil {
		hold.Release()
		return nil, err
	}
	return hold.Release, nil
}

// JudgeRequest's field numbers (verifier.proto): before, after, and a
// Read's records.
const (
	judgeBeforeField = 3
	judgeAfterField  = 4
	readRecordsField = 3
)

// wireField is one field of a protobuf message as it arrived: its number
// and type, the whole field (tag included) and its value's bytes (for a
// length-delimited field, the contents).
type wireField struct {
	num   protowire.Number
	typ   protowire.Type
	whole []byte
	value []byte
}

// eachField calls f with each field of the message data in order, until f
// returns false; it reports false when data is malformed (the walk stops
// there).
func eachField(data []byte, f func(wireField) bool) bool {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 {
			return false
		}
		field := wireField{num: num, typ: typ, whole: data[:n+m], value: data[n : n+m]}
		if typ == protowire.BytesType {
			field.value, _ = protowire.ConsumeBytes(field.value)
		}
		data = data[n+m:]
		if !f(field) {
			return true
		}
	}
	return true
}

// countJudgeRecords counts the records of a JudgeRequest's before and
// after reads in its wire bytes, without decoding any, and refuses a
// request with more than limit (InvalidArgument naming the read, the
// limit and the flag). limit <= 0 counts nothing. Malformed bytes are
// left to the decoder.
func countJudgeRecords(data []byte, limit int) error {
	if limit <= 0 {
		return nil
	}
	total, over := 0, ""
	eachField(data, func(f wireField) bool {
		if !isRead(f) {
			return true
		}
		eachField(f.value, func(r wireField) bool {
			if r.num == readRecordsField {
				total++
			}
			return true
		})
		if total > limit {
			over = readName(f.num) + ".records"
			return false
		}
		return true
	})
	if over != "" {
		return invalid(over, fmt.Sprintf("the request carries more than %d records, the daemon's limit (--max-judge-records); split the read", limit))
	}
	return nil
}

// isRead reports whether f is a JudgeRequest's before or after read.
func isRead(f wireField) bool {
	return (f.num == judgeBeforeField || f.num == judgeAfterField) && f.typ == protowire.BytesType
}

// readName is the name of a JudgeRequest's read field: before or after.
func readName(num protowire.Number) string {
	if num == judgeAfterField {
		return "after"
	}
	return "before"
}

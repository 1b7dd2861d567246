package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/internal/fromproto"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
	"github.com/verifierd/verifierd/sdk/internal/wire"
)

var (
	// ErrPluginShutdown is every transport failure to an adapter: the
	// process died or was killed, the connection broke, a stream was cut.
	// The caller must treat the read as unavailable, never as complete.
	ErrPluginShutdown = errors.New("adapter plugin shut down or its connection broke")
	// ErrProtocol means the adapter answered outside the wire contract (no
	// header, no trailer, a record count that does not add up, a record that
	// is not a JSON object). The read is unusable.
	ErrProtocol = errors.New("adapter broke the capture protocol")
	// ErrAdapterFailed means the adapter returned an error or panicked.
	ErrAdapterFailed = errors.New("adapter failed")
	// ErrNoVerdictHook means the adapter does not implement the optional
	// Verdict hook; the daemon's verdict stands.
	ErrNoVerdictHook = errors.New("adapter has no verdict hook")
)

// AdapterInfo is what an adapter says about itself (GetInfo), with the API
// versions it speaks.
type AdapterInfo struct {
	sdk.Info
	APIVersions []string
}

// Client is the daemon's handle on one adapter, in a subprocess or in
// process. Errors wrap ErrPluginShutdown, ErrProtocol, ErrAdapterFailed or
// ErrNoVerdictHook, or the caller's context error.
//
// One process serves many configured instances: Configure returns an
// instance id that every later call names, and each call carries the
// session's run parameters (in the request's Params).
type Client interface {
	// GetInfo describes the adapter, or the configured instance when
	// instanceID is not "".
	GetInfo(ctx context.Context, instanceID string) (AdapterInfo, error)
	// Configure returns the new instance's id, or a *refusal.Error when
	// the adapter refuses.
	Configure(ctx context.Context, req sdk.ConfigureRequest) (string, error)
	// CheckParams binds params into the instance's read without reading:
	// nil when they bind (or the adapter binds none), a *refusal.Error
	// when they do not.
	CheckParams(ctx context.Context, instanceID string, params map[string]string) error
	// Release drops an instance.
	Release(ctx context.Context, instanceID string) error
	// TestConnection returns a *refusal.Error when the run parameters
	// cannot be bound.
	TestConnection(ctx context.Context, instanceID string, req sdk.TestRequest) (sdk.TestResult, error)
	// CaptureBefore and CaptureAfter return once the stream's header has
	// arrived; the records follow through the returned Stream. They
	// return a *refusal.Error when the run parameters cannot be bound.
	CaptureBefore(ctx context.Context, instanceID string, req sdk.CaptureRequest) (*Stream, error)
	CaptureAfter(ctx context.Context, instanceID string, req sdk.CaptureRequest) (*Stream, error)
	Verdict(ctx context.Context, instanceID string, req sdk.VerdictRequest) (sdk.Demotion, error)
}

// grpcClient implements Client over AdapterService.
type grpcClient struct {
	rpc adapterv1.AdapterServiceClient
	// exited reports whether the plugin process is gone, when known; then
	// any error is a shutdown whatever its status code.
	exited func() bool
}

// newClient returns a Client over an established connection to an adapter.
func newClient(conn grpc.ClientConnInterface) Client {
	return &grpcClient{rpc: adapterv1.NewAdapterServiceClient(conn)}
}

func (c *grpcClient) GetInfo(ctx context.Context, instanceID string) (AdapterInfo, error) {
	res, err := c.rpc.GetInfo(ctx, &adapterv1.GetInfoRequest{DaemonApiVersions: wire.APIVersions, InstanceId: instanceID})
	if err != nil {
		return AdapterInfo{}, c.wrap(ctx, "get info", err)
	}
	info, versions := fromproto.Info(res)
	return AdapterInfo{Info: info, APIVersions: versions}, nil
}

func (c *grpcClient) Configure(ctx context.Context, req sdk.ConfigureRequest) (string, error) {
	if req.APIVersion == "" {
		req.APIVersion = sdk.APIVersion
	}
	res, err := c.rpc.Configure(ctx, toproto.ConfigureRequest(req))
	if err != nil {
		return "", c.wrap(ctx, "configure", err)
	}
	return fromproto.ConfigureResponse(res)
}

func (c *grpcClient) CheckParams(ctx context.Context, instanceID string, params map[string]string) error {
	res, err := c.rpc.CheckParams(ctx, &adapterv1.CheckParamsRequest{InstanceId: instanceID, Params: params})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	if err != nil {
		return c.wrap(ctx, "check params", err)
	}
	return fromproto.Refusal(res.GetRefusal())
}

func (c *grpcClient) Release(ctx context.Context, instanceID string) error {
	if _, err := c.rpc.Release(ctx, &adapterv1.ReleaseRequest{InstanceId: instanceID}); err != nil {
		return c.wrap(ctx, "release", err)
	}
	return nil
}

func (c *grpcClient) TestConnection(ctx context.Context, instanceID string, req sdk.TestRequest) (sdk.TestResult, error) {
	res, err := c.rpc.TestConnection(ctx, &adapterv1.TestConnectionRequest{InstanceId: instanceID, Params: req.Params})
	if err != nil {
		return sdk.TestResult{}, c.wrap(ctx, "test connection", err)
	}
	if err := fromproto.Refusal(res.GetRefusal()); err != nil {
		return sdk.TestResult{}, err
	}
	return fromproto.TestResult(res), nil
}

func (c *grpcClient) CaptureBefore(ctx context.Context, instanceID string, req sdk.CaptureRequest) (*Stream, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.CaptureBefore(ctx, &adapterv1.CaptureBeforeRequest{Spec: toproto.CaptureSpec(req), InstanceId: instanceID, Params: req.Params})
	if err != nil {
		cancel()
		return nil, c.wrap(parent, "capture before", err)
	}
	return c.open(parent, cancel, "capture before", func() (*adapterv1.CaptureChunk, error) {
		res, err := stream.Recv()
		return res.GetChunk(), err
	})
}

func (c *grpcClient) CaptureAfter(ctx context.Context, instanceID string, req sdk.CaptureRequest) (*Stream, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.CaptureAfter(ctx, &adapterv1.CaptureAfterRequest{Spec: toproto.CaptureSpec(req), InstanceId: instanceID, Params: req.Params})
	if err != nil {
		cancel()
		return nil, c.wrap(parent, "capture after", err)
	}
	return c.open(parent, cancel, "capture after", func() (*adapterv1.CaptureChunk, error) {
		res, err := stream.Recv()
		return res.GetChunk(), err
	})
}

func (c *grpcClient) Verdict(ctx context.Context, instanceID string, req sdk.VerdictRequest) (sdk.Demotion, error) {
	vr := toproto.VerdictRequest(req)
	vr.InstanceId = instanceID
	res, err := c.rpc.Verdict(ctx, vr)
	if status.Code(err) == codes.Unimplemented {
		return sdk.Demotion{}, ErrNoVerdictHook
	}
	if err != nil {
		return sdk.Demotion{}, c.wrap(ctx, "verdict", err)
	}
	return fromproto.Demotion(res), nil
}

// wrap turns an RPC error into one of the package's sentinels. ctx is the
// call's context: when it ended, its error is the cause.
func (c *grpcClient) wrap(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("adapter %s: %w", what, context.Cause(ctx))
	}
	st, _ := status.FromError(err)
	// The status error stays in the chain (status.Code still reads it) next
	// to the sentinel the caller branches on.
	cause := st.Err()
	if c.exited != nil && c.exited() {
		return fmt.Errorf("adapter %s: %w: %w", what, ErrPluginShutdown, cause)
	}
	switch st.Code() {
	case codes.Unavailable, codes.Canceled, codes.Aborted:
		// Canceled without our context ending: the server side went away.
		return fmt.Errorf("adapter %s: %w: %w", what, ErrPluginShutdown, cause)
	case codes.DeadlineExceeded:
		return fmt.Errorf("adapter %s: %w: %w", what, context.DeadlineExceeded, cause)
	}
	return fmt.Errorf("adapter %s: %w: %w", what, ErrAdapterFailed, cause)
}

// Stream is one capture in flight. The header (reachability and capture time)
// has arrived; the records are read from the stream as they are consumed, so
// a large read set never sits whole in the daemon's memory.
//
// Consume it exactly once with Batches, RawBatches or Records, or Close it.
// A consumption that ends without an error has seen every record the adapter
// sent and the adapter's closing count matched; any error means the read is
// incomplete and must not be judged as a read set.
type Stream struct {
	Reachable bool
	Reason    string
	// Code is the unreachable read's reason code (sdk.Capture.Code): the
	// system of record answered but the read is not whole.
	Code string
	At   time.Time

	recv   func() (*adapterv1.CaptureChunk, error)
	cancel context.CancelFunc
	ctx    context.Context // the caller's; its end explains a broken stream
	client *grpcClient
	what   string
	once   sync.Once
	// onClose runs once when the capture is closed or consumed.
	closeMu sync.Mutex
	closed  bool
	onClose []func()
	used    bool
	// done is set once the stream was read to its trailer before any
	// consumer ran (an unreachable read); consumers then see no records.
	done bool
}

// open reads the header of a capture stream. ctx is the caller's context,
// cancel ends the stream's own.
func (c *grpcClient) open(ctx context.Context, cancel context.CancelFunc, what string, recv func() (*adapterv1.CaptureChunk, error)) (*Stream, error) {
	capt := &Stream{recv: recv, cancel: cancel, ctx: ctx, client: c, what: what}
	chunk, err := recv()
	if err != nil {
		defer capt.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("adapter %s: %w: stream ended before its header", what, ErrProtocol)
		}
		return nil, c.wrap(ctx, what, err)
	}
	h := chunk.GetHeader()
	if h == nil {
		capt.Close()
		return nil, fmt.Errorf("adapter %s: %w: first message is not a header", what, ErrProtocol)
	}
	head := fromproto.CaptureHeader(h)
	capt.Reachable, capt.Reason, capt.Code, capt.At = head.Reachable, head.Reason, head.Code, head.At
	if head.Refusal != nil {
		capt.Close()
		return nil, head.Refusal
	}
	if !capt.Reachable {
		// An unreachable read carries no records; read to the trailer so
		// the stream is known to have ended cleanly, then release it.
		for _, err := range capt.RawBatches() {
			if err != nil {
				return nil, err
			}
		}
		capt.used, capt.done = false, true
	}
	return capt, nil
}

// Close abandons the rest of the stream. It is safe to call at any time and
// more than once.
func (c *Stream) Close() {
	c.once.Do(c.cancel)
	c.closeMu.Lock()
	c.closed = true
	fs := c.onClose
	c.onClose = nil
	c.closeMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// OnClose registers f to run once when the capture is closed or fully
// consumed, at once if it already is (the daemon's host gives back a
// concurrency slot with it).
func (c *Stream) OnClose(f func()) {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		f()
		return
	}
	c.onClose = append(c.onClose, f)
	c.closeMu.Unlock()
}

// RawBatches yields the records batch by batch as the adapter sent them, each
// a compact JSON object; the records of one batch are slices of the one
// buffer it arrived in. The last pair has a non-nil error if and only if the
// read is incomplete or broken (a batch whose record ends do not add up
// included).
func (c *Stream) RawBatches() iter.Seq2[[][]byte, error] {
	return func(yield func([][]byte, error) bool) {
		defer c.Close()
		if c.done && !c.used {
			c.used = true
			return
		}
		if c.used {
			yield(nil, fmt.Errorf("adapter %s: %w: capture already consumed", c.what, ErrProtocol))
			return
		}
		c.used = true
		var got int64
		for {
			chunk, err := c.recv()
			if errors.Is(err, io.EOF) {
				yield(nil, fmt.Errorf("adapter %s: %w: stream ended after %d records without its closing count", c.what, ErrProtocol, got))
				return
			}
			if err != nil {
				yield(nil, c.client.wrap(c.ctx, c.what, err))
				return
			}
			switch ch := chunk.GetChunk().(type) {
			case *adapterv1.CaptureChunk_Batch:
				recs, err := fromproto.Batch(ch.Batch)
				if err != nil {
					yield(nil, fmt.Errorf("adapter %s: %w: %v", c.what, ErrProtocol, err))
					return
				}
				if !c.Reachable && len(recs) > 0 {
					yield(nil, fmt.Errorf("adapter %s: %w: records after an unreachable header", c.what, ErrProtocol))
					return
				}
				got += int64(len(recs))
				if len(recs) > 0 && !yield(recs, nil) {
					return
				}
			case *adapterv1.CaptureChunk_Trailer:
				if n := ch.Trailer.GetRecordCount(); n != got {
					yield(nil, fmt.Errorf("adapter %s: %w: adapter counted %d records, %d arrived", c.what, ErrProtocol, n, got))
				}
				return
			default:
				yield(nil, fmt.Errorf("adapter %s: %w: unexpected %T in the stream", c.what, ErrProtocol, ch))
				return
			}
		}
	}
}

// Batches yields the records batch by batch, decoded; numbers are
// json.Number so their text stays exact. Error semantics as RawBatches.
func (c *Stream) Batches() iter.Seq2[[]sdk.Record, error] {
	return func(yield func([]sdk.Record, error) bool) {
		for raw, err := range c.RawBatches() {
			if err != nil {
				yield(nil, err)
				return
			}
			batch := make([]sdk.Record, len(raw))
			for i, b := range raw {
				r, err := fromproto.Record(b)
				if err != nil {
					yield(nil, fmt.Errorf("adapter %s: %w: %v", c.what, ErrProtocol, err))
					return
				}
				batch[i] = r
			}
			if !yield(batch, nil) {
				return
			}
		}
	}
}

// Records collects the whole read. Meant for small reads and tests; the
// daemon streams with Batches.
func (c *Stream) Records() ([]sdk.Record, error) {
	var all []sdk.Record
	for batch, err := range c.Batches() {
		if err != nil {
			return nil, err
		}
		all = append(all, batch...)
	}
	return all, nil
}

// DecodeRecord decodes one record as adapters send it: exactly one JSON
// object, numbers as json.Number so their text stays exact. Flat records
// take a fast path; anything else goes through encoding/json. The daemon
// uses it for stored baselines, which it keeps as the adapter's bytes.
func DecodeRecord(b []byte) (sdk.Record, error) { return fromproto.Record(b) }

// MaxBatchRecords is the most records one batch of a Stream holds: captures
// are cut into batches of at most this many records and 1 MiB, so a read
// set of any size streams.
const MaxBatchRecords = 1000

// The server batches by wire.MaxBatchRecords: the two may not drift apart
// (a negative difference does not compile).
const _ = uint(MaxBatchRecords-wire.MaxBatchRecords) + uint(wire.MaxBatchRecords-MaxBatchRecords)

// NegotiateAPIVersion picks the newest API version that both this side and
// an adapter (its GetInfo list) speak.
func NegotiateAPIVersion(theirs []string) (string, error) {
	for _, v := range wire.APIVersions {
		if slices.Contains(theirs, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("adapter speaks API versions %q, this side speaks %q: rebuild the adapter with a matching SDK", theirs, wire.APIVersions)
}

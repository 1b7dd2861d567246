package host

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// rawAdapter answers CaptureAfter with the chunks it is given, as a
// misbehaving adapter (or one built with another SDK) could.
type rawAdapter struct {
	adapterv1.UnimplementedAdapterServiceServer
	chunks []*adapterv1.CaptureChunk
}

func (r *rawAdapter) CaptureAfter(_ *adapterv1.CaptureAfterRequest, stream grpc.ServerStreamingServer[adapterv1.CaptureAfterResponse]) error {
	for _, c := range r.chunks {
		if err := stream.Send(&adapterv1.CaptureAfterResponse{Chunk: c}); err != nil {
			return err
		}
	}
	return nil
}

func rawClient(t *testing.T, chunks ...*adapterv1.CaptureChunk) Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	adapterv1.RegisterAdapterServiceServer(srv, &rawAdapter{chunks: chunks})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///raw", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return newClient(conn)
}

func header() *adapterv1.CaptureChunk {
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Header{Header: &adapterv1.CaptureHeader{Reachable: true, CapturedAt: timestamppb.Now()}}}
}

func batch(b *adapterv1.RecordBatch) *adapterv1.CaptureChunk {
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Batch{Batch: b}}
}

func trailer(n int64) *adapterv1.CaptureChunk {
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Trailer{Trailer: &adapterv1.CaptureTrailer{RecordCount: n}}}
}

// TestPackedBatchesOnReceipt: the client takes packed batches (and the
// unpacked form of earlier SDKs) apart, and a batch whose ends do not cut
// its buffer into records, or a count that does not add up, makes the read
// unusable (ErrProtocol) with the reason.
func TestPackedBatchesOnReceipt(t *testing.T) {
	t.Parallel()
	recs := []byte(`{"id":1}{"id":2}{"id":3}`)
	for _, tc := range []struct {
		name   string
		chunks []*adapterv1.CaptureChunk
		want   []string // the records, or nil when the read must fail
		reason string
	}{
		{"packed", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{Records: recs, Ends: []uint32{8, 16, 24}}), trailer(3)},
			[]string{`{"id":1}`, `{"id":2}`, `{"id":3}`}, ""},
		{"unpacked, as earlier SDKs send", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{RecordsJson: [][]byte{[]byte(`{"id":1}`)}}), trailer(1)},
			[]string{`{"id":1}`}, ""},
		{"ends not increasing", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{Records: recs, Ends: []uint32{16, 8, 24}}), trailer(3)},
			nil, "not after the previous end"},
		{"ends short of the records", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{Records: recs, Ends: []uint32{8, 16}}), trailer(2)},
			nil, "last record ends at byte 16 of its 24"},
		{"count trailer still checked", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{Records: recs, Ends: []uint32{8, 16, 24}}), trailer(4)},
			nil, "adapter counted 4 records, 3 arrived"},
		{"both forms", []*adapterv1.CaptureChunk{header(), batch(&adapterv1.RecordBatch{RecordsJson: [][]byte{[]byte(`{}`)}, Records: recs, Ends: []uint32{8, 16, 24}}), trailer(4)},
			nil, "fills both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := rawClient(t, tc.chunks...)
			capt, err := c.CaptureAfter(t.Context(), "i1", sdk.CaptureRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var rerr error
			for b, err := range capt.RawBatches() {
				if err != nil {
					rerr = err
					break
				}
				for _, r := range b {
					got = append(got, string(r))
				}
			}
			if tc.want == nil {
				if !errors.Is(rerr, ErrProtocol) || !strings.Contains(rerr.Error(), tc.reason) {
					t.Fatalf("read ended with %v; want ErrProtocol saying %q", rerr, tc.reason)
				}
				return
			}
			if rerr != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("records %q, error %v; want %q", got, rerr, tc.want)
			}
		})
	}
}

// paramAdapter binds the run parameter "q" and refuses "bad"; it counts
// its baseline reads.
type paramAdapter struct {
	reads *int
}

func (paramAdapter) Info() sdk.Info                                        { return sdk.Info{Kind: "param-test", Tier: 1} }
func (paramAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (paramAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (paramAdapter) CheckParams(_ context.Context, params map[string]string) error {
	if params["q"] == "bad" {
		return &refusal.Error{Path: "options.q", Message: "does not bind"}
	}
	return nil
}
func (a paramAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	*a.reads++
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": int64(1)})}, nil
}
func (a paramAdapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.CaptureBefore(ctx, req)
}

// TestCaptureBeforeRefusesAsCheckParams: a baseline capture binds the run
// parameters with the adapter's CheckParams before reading, and refuses
// with exactly the *refusal.Error the CheckParams call gives.
func TestCaptureBeforeRefusesAsCheckParams(t *testing.T) {
	t.Parallel()
	reads := 0
	p, err := NewInProcess(func() sdk.Adapter { return paramAdapter{reads: &reads} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	id, err := p.Configure(t.Context(), sdk.ConfigureRequest{Kind: "param-test", Config: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{"q": "bad"}
	checked := p.CheckParams(t.Context(), id, bad)
	_, captured := p.CaptureBefore(t.Context(), id, sdk.CaptureRequest{Params: bad})
	var a, b *refusal.Error
	if !errors.As(checked, &a) || !errors.As(captured, &b) || *a != *b || a.Path != "options.q" {
		t.Fatalf("CheckParams: %#v, CaptureBefore: %#v; want the same refusal at options.q", checked, captured)
	}
	if reads != 0 {
		t.Fatalf("the refused capture read %d times", reads)
	}
	c, err := p.CaptureBefore(t.Context(), id, sdk.CaptureRequest{Params: map[string]string{"q": "ok"}})
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := c.Records(); err != nil || len(recs) != 1 || reads != 1 {
		t.Fatalf("bound capture: %v, %v after %d reads", recs, err, reads)
	}
}

package plugin

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
	return NewClient(conn)
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

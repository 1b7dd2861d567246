package host

import (
	"context"
	"net"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/internal/wire"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// InProcess serves an adapter inside the calling process over an in-memory
// gRPC connection. Everything a subprocess adapter goes through (the same
// server, converters, batching, message bounds and panic recovery) runs; only
// the process boundary, the handshake and mTLS are missing. First-party
// adapters use it in unit tests with the same factory as their plugin main.
type InProcess struct {
	Client

	server *grpc.Server
	conn   *grpc.ClientConn
	lis    *bufconn.Listener
}

// NewInProcess starts factory's adapter in process. logger may be nil.
func NewInProcess(factory func() sdk.Adapter, logger hclog.Logger) (*InProcess, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	lis := bufconn.Listen(1 << 20)
	srv := wire.NewGRPCServer(logger, wire.MaxMessageBytes)
	wire.Register(srv, factory, logger)
	go srv.Serve(lis)

	conn, err := grpc.NewClient("passthrough:///in-process-adapter", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(wire.CallOptions()...),
	}, append(wire.DialOptions(), tracing.DialOptions()...)...)...)
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &InProcess{Client: newClient(conn), server: srv, conn: conn, lis: lis}, nil
}

// Close stops the adapter's server and the connection.
func (p *InProcess) Close() error {
	p.server.Stop()
	return p.conn.Close()
}

// Crash cuts the server off abruptly, as a plugin process dying would: calls
// in flight, streams included, fail on the client side.
func (p *InProcess) Crash() {
	p.server.Stop()
	p.lis.Close()
}

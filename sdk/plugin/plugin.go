package plugin

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
)

// AdapterPlugin is the go-plugin glue for an adapter, gRPC only. The adapter
// binary serves it with Factory set; the daemon puts a zero AdapterPlugin in
// its plugin map and receives a Client from Dispense.
type AdapterPlugin struct {
	goplugin.NetRPCUnsupportedPlugin

	// Factory builds the adapter a plugin process serves. Unused by clients.
	Factory func() sdk.Adapter
	// Logger is the server's logger; nil discards.
	Logger hclog.Logger
}

var _ goplugin.GRPCPlugin = (*AdapterPlugin)(nil)

// GRPCServer registers AdapterService for one adapter built by Factory.
func (p *AdapterPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Factory == nil {
		return errors.New("AdapterPlugin.Factory is nil: nothing to serve")
	}
	logger := p.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	adapterv1.RegisterAdapterServiceServer(s, newServer(p.Factory, logger))
	return nil
}

// GRPCClient returns a Client over the plugin's connection.
func (p *AdapterPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewClient(conn), nil
}

package wire

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk"
)

// AdapterPlugin is the go-plugin glue for an adapter, gRPC only. The adapter
// binary serves it with Factory set; the daemon puts one with Dispense set in
// its plugin map and receives what Dispense makes of the connection.
type AdapterPlugin struct {
	goplugin.NetRPCUnsupportedPlugin

	// Factory builds the adapter a plugin process serves. Unused by clients.
	Factory func() sdk.Adapter
	// Dispense wraps the daemon's connection to the plugin. Unused by
	// servers.
	Dispense func(conn *grpc.ClientConn) any
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
	Register(s, p.Factory, logger)
	return nil
}

// GRPCClient returns what Dispense makes of the plugin's connection.
func (p *AdapterPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	if p.Dispense == nil {
		return nil, errors.New("AdapterPlugin.Dispense is nil: nothing to dispense")
	}
	return p.Dispense(conn), nil
}

package host

import (
	"fmt"
	"os/exec"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk/internal/wire"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// ClientConfig is the go-plugin client configuration for one adapter binary:
// the shared handshake, gRPC only, AutoMTLS, bounded message sizes, and an
// environment that is exactly cmd.Env (the daemon's own environment is not
// inherited; see tracing.Env for the trace variables a daemon passes on).
// When traces are on (tracing.Enabled) every call carries the caller's trace
// context. Plugin stderr (hclog JSON) and anything the adapter printed to
// stdout after the handshake go to logger. Callers may add a SecureConfig
// (SHA-256 pin) or adjust the rest before Start.
func ClientConfig(cmd *exec.Cmd, logger hclog.Logger) *goplugin.ClientConfig {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &goplugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		Plugins:          goplugin.PluginSet{wire.PluginName: &wire.AdapterPlugin{Dispense: func(conn *grpc.ClientConn) any { return newClient(conn) }}},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		Logger:           logger,
		SyncStdout:       logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		SyncStderr:       logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		GRPCDialOptions:  append(append([]grpc.DialOption{grpc.WithDefaultCallOptions(wire.CallOptions()...)}, wire.DialOptions()...), tracing.DialOptions()...),
	}
}

// Subprocess is an adapter running as a plugin process.
type Subprocess struct {
	Client
	// Plugin is the underlying go-plugin client, for Kill, Exited and
	// ReattachConfig.
	Plugin *goplugin.Client
}

// Start launches the plugin described by cfg, checks the handshake and
// dispenses its Client. Once the process is gone, every error of the Client
// wraps ErrPluginShutdown.
func Start(cfg *goplugin.ClientConfig) (*Subprocess, error) {
	pc := goplugin.NewClient(cfg)
	rpc, err := pc.Client()
	if err != nil {
		pc.Kill()
		return nil, fmt.Errorf("start adapter %s: %w", cfg.Cmd.Path, err)
	}
	raw, err := rpc.Dispense(wire.PluginName)
	if err != nil {
		pc.Kill()
		return nil, fmt.Errorf("start adapter %s: %w", cfg.Cmd.Path, err)
	}
	c, ok := raw.(*grpcClient)
	if !ok {
		pc.Kill()
		return nil, fmt.Errorf("start adapter %s: dispensed %T, not an adapter client", cfg.Cmd.Path, raw)
	}
	c.exited = pc.Exited
	return &Subprocess{Client: c, Plugin: pc}, nil
}

// Pid is the plugin process id, or 0 when unknown.
func (s *Subprocess) Pid() int {
	if rc := s.Plugin.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Kill stops the plugin: gracefully first, forcibly after go-plugin's grace
// period.
func (s *Subprocess) Kill() { s.Plugin.Kill() }

package plugin

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk/internal/sdkapi"
	"github.com/verifierd/verifierd/sdk/tracing"
)

// LogLevelEnv names the environment variable that sets an adapter's log
// level (trace, debug, info, warn, error); info when unset.
const LogLevelEnv = "VERIFIERD_ADAPTER_LOG_LEVEL"

// parentPollInterval is how often a served adapter checks that the daemon
// that started it is still its parent.
const parentPollInterval = time.Second

// Serve runs an adapter as a go-plugin subprocess and returns when the
// daemon closes it. It never returns to the caller when started by hand
// without the daemon's handshake (it prints why and exits).
//
// Before anything else it guards stdout (see guardStdout), then builds the
// adapter with factory, logs as hclog JSON on stderr, starts the
// parent-death watchdog, sets up traces when the environment asks for them
// (package tracing) and serves gRPC with the SDK's bounds.
func Serve(factory func() sdkapi.Adapter) {
	guardStdout()

	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "adapter",
		Level:      hclog.LevelFromString(os.Getenv(LogLevelEnv)),
		Output:     os.Stderr,
		JSONFormat: true,
	})
	if logger.GetLevel() == hclog.NoLevel {
		logger.SetLevel(hclog.Info)
	}

	adapter := factory()
	if kind := adapter.Info().Kind; kind != "" {
		logger = logger.Named(kind)
	}
	watchParent(logger, parentPollInterval, os.Exit)
	// Traces when the daemon passed the OTEL_* variables on (tracing.Env);
	// the spans still batched are flushed when the daemon stops the plugin.
	shutdownTraces, err := tracing.Setup(context.Background(), "verifier-adapter-"+adapter.Info().Kind)
	if err != nil {
		logger.Warn("traces are off", "error", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTraces(ctx); err != nil {
			logger.Warn("flushing traces", "error", err)
		}
	}()

	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins: goplugin.PluginSet{PluginName: &AdapterPlugin{
			Factory: func() sdkapi.Adapter { return adapter },
			Logger:  logger,
		}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return NewGRPCServer(logger, opts...)
		},
		Logger: logger,
	})
}

// watchParent exits the process when its parent changes, i.e. the daemon
// died without stopping the plugin (kill -9, OOM). Polling needs no cgo and
// no cooperation from the parent; the daemon may also set Pdeathsig on Linux.
func watchParent(logger hclog.Logger, every time.Duration, exit func(int)) {
	parent := os.Getppid()
	if parent <= 1 {
		// Already orphaned or started by init: nothing to watch.
		logger.Warn("parent watchdog disabled: no parent process to watch", "ppid", parent)
		return
	}
	go func() {
		for range time.Tick(every) {
			if now := os.Getppid(); now != parent {
				logger.Error("the daemon that started this adapter is gone; exiting", "parent_pid", parent, "ppid_now", now)
				exit(3)
				return
			}
		}
	}()
}

// isHandshake finds go-plugin's handshake line in what was written to
// stdout: "CORE|APP|NETWORK|ADDR|PROTOCOL|CERT". It returns the offset where
// it starts, or -1.
func isHandshake(line string) int {
	for _, network := range []string{"tcp", "unix"} {
		prefix := strconv.Itoa(goplugin.CoreProtocolVersion) + "|" + strconv.Itoa(ProtocolVersion) + "|" + network + "|"
		if i := strings.Index(line, prefix); i >= 0 {
			return i
		}
	}
	return -1
}

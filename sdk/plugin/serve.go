package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/internal/wire"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// LogLevelEnv names the environment variable that sets an adapter's log
// level (trace, debug, info, warn, error); info when unset.
const LogLevelEnv = "VERIFIERD_ADAPTER_LOG_LEVEL"

// parentPollInterval is how often a served adapter checks that the daemon
// that started it is still its parent.
const parentPollInterval = time.Second

// Option adjusts Serve.
type Option func(*serveOptions)

type serveOptions struct {
	maxMessageBytes int
	level           hclog.Level
}

// WithMaxMessageBytes bounds every gRPC message the plugin receives or
// sends (default 8 MiB). Captures are batched far below it; raise
// it only for an adapter whose single records are large.
func WithMaxMessageBytes(n int) Option {
	return func(o *serveOptions) {
		if n > 0 {
			o.maxMessageBytes = n
		}
	}
}

// WithDebug logs at debug level, whatever VERIFIERD_ADAPTER_LOG_LEVEL says.
func WithDebug() Option {
	return func(o *serveOptions) { o.level = hclog.Debug }
}

// ErrNotStartedByDaemon is Serve's answer when the binary was started by
// hand instead of by the daemon's go-plugin handshake.
var ErrNotStartedByDaemon = errors.New("this binary is a verifierd adapter plugin: the daemon starts it; running it by hand does nothing (put it in the daemon's plugin dir)")

// Serve runs the adapter that factory builds as a verifierd plugin and
// returns when the daemon stops it. factory is called once per Configure:
// one process serves many configured instances. Main is a plugin binary's
// whole main around it.
//
// Before anything else it guards stdout (nothing but the go-plugin
// handshake ever reaches the real stdout; stray prints go to stderr), logs
// as hclog JSON on stderr, starts the parent-death watchdog (the plugin
// exits by itself when the daemon that started it dies) and serves gRPC
// with the SDK's bounds; a panic in any call answers codes.Internal instead
// of killing the process. It returns ErrNotStartedByDaemon, at once, when
// the handshake's cookie is missing.
func Serve(factory func() sdk.Adapter, opts ...Option) error {
	if os.Getenv(wire.Handshake.MagicCookieKey) != wire.Handshake.MagicCookieValue {
		return ErrNotStartedByDaemon
	}
	o := serveOptions{maxMessageBytes: wire.MaxMessageBytes, level: hclog.LevelFromString(os.Getenv(LogLevelEnv))}
	for _, opt := range opts {
		opt(&o)
	}
	guardStdout()

	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "adapter",
		Level:      o.level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
	if logger.GetLevel() == hclog.NoLevel {
		logger.SetLevel(hclog.Info)
	}

	kind := factory().Info().Kind
	if kind != "" {
		logger = logger.Named(kind)
	}
	watchParent(logger, parentPollInterval, os.Exit)
	// Traces when the daemon passed the OTEL_* variables on (tracing.Env);
	// the spans still batched are flushed when the daemon stops the plugin.
	shutdownTraces, err := tracing.Setup(context.Background(), "verifier-adapter-"+kind)
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
		HandshakeConfig: wire.Handshake,
		Plugins: goplugin.PluginSet{wire.PluginName: &wire.AdapterPlugin{
			Factory: factory,
			Logger:  logger,
		}},
		GRPCServer: func(gopts []grpc.ServerOption) *grpc.Server {
			return wire.NewGRPCServer(logger, o.maxMessageBytes, gopts...)
		},
		Logger: logger,
	})
	return nil
}

// Main is a plugin binary's main: it runs Serve and, when Serve fails (the
// binary was started by hand, without the daemon's handshake), prints the
// error on stderr and exits with status 1:
//
//	func main() { plugin.Main(ledger.New) }
func Main(factory func() sdk.Adapter, opts ...Option) {
	if err := Serve(factory, opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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
		prefix := strconv.Itoa(goplugin.CoreProtocolVersion) + "|" + strconv.Itoa(wire.ProtocolVersion) + "|" + network + "|"
		if i := strings.Index(line, prefix); i >= 0 {
			return i
		}
	}
	return -1
}

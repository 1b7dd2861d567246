// Command verifierd is the verification daemon: runtime clients call Begin
// before a consequential step and Verify after it, over gRPC; adapters run as
// plugin subprocesses; the daemon does all the judging.
//
//	verifierd --listen 127.0.0.1:7443 --data-dir DIR --plugin-dir DIR [--config FILE] [--http-listen ADDR] [--insecure]
//	          [--http-allowed-hosts HOST,...] [--max-connections N] [--handshake-timeout D] [--idle-timeout D]
//	          [--store postgres://USER@HOST:PORT/DB --store-password-env NAME] [--retain 168h]
//	          [--evidence-key FILE] [--signing-key FILE] [--rotate-keys]
//	verifierd store check|compact|salvage --data-dir DIR [--out DIR] [--evidence-key FILE]
//	verifierd store check|salvage --store postgres://… [--out postgres://…] [--evidence-key FILE]
//
// SIGTERM or SIGINT drains in-flight calls, then stops the adapters. SIGUSR1
// runs a garbage collection and returns freed memory to the OS (for
// measuring resident memory, as the soak test does).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/server"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/sdk/tracing"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "store" {
		os.Exit(storeMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "verifierd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("verifierd", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7443", "address to serve the gRPC API on")
	dataDir := fs.String("data-dir", "verifierd-data", "folder of the embedded session store")
	pluginDir := fs.String("plugin-dir", "", "folder of customer adapter binaries (verifier-adapter-<kind>)")
	builtinDir := fs.String("builtin-dir", "", "folder of the first-party adapter binaries (default: beside the verifierd binary)")
	configPath := fs.String("config", "", "daemon config file (YAML): plugin pins, secrets allowlist, API auth, named deployments and workflows, policy")
	logLevel := fs.String("log-level", "info", "trace, debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON lines")
	drain := fs.Duration("drain", 30*time.Second, "how long SIGTERM waits for in-flight calls")
	storeSync := fs.Bool("store-sync", true, "fsync every session write; false survives a daemon crash but not a machine crash")
	initStore := fs.Bool("init-store", false, "accept a missing or empty store in a data dir that held one before (its sessions are lost)")
	retain := fs.Duration("retain-unfinished", 24*time.Hour, "remove sessions begun but never verified after this long, with their baselines (0: keep)")
	insecure := fs.Bool("insecure", false, "serve a non-loopback --listen address without a bearer token and TLS")
	allowInline := fs.Bool("allow-inline-deployments", false, "development only: accept deployments sent by the caller (who then chooses where the daemon reads); never with secrets or a compensator")
	signingKey := fs.String("signing-key", "", "Ed25519 key file that signs receipts (default: <data-dir>/keys/receipt-signing.key, created on first start)")
	httpListen := fs.String("http-listen", "127.0.0.1:7444", "address of the HTTP listener (VerifierService as HTTP/JSON with /openapi.json, reward routes for trainers, /metrics, the operator console at /console/; docs/daemon.md, docs/rewards.md, docs/operations.md); empty: off")
	storeDSN := fs.String("store", "", "session store: empty for the embedded store in --data-dir, or a PostgreSQL DSN postgres://USER@HOST:PORT/DB?sslmode=… shared by replicas (docs/operations.md)")
	storePasswordEnv := fs.String("store-password-env", "", "environment variable holding the PostgreSQL password of --store")
	retainFinished := fs.Duration("retain", 168*time.Hour, "remove verified sessions, their results and baselines this long after they were verified (ledger entries stay; 0: keep)")
	evidenceKeyFile := fs.String("evidence-key", "", "file holding the 32-byte evidence key, the same on every replica of one --store (default: <data-dir>/keys/evidence-hmac.key, created on first start)")
	signingKeyEnv := fs.String("signing-key-env", "", "environment variable holding the receipt signing key as a base64 32-byte Ed25519 seed, instead of --signing-key (the same on every replica)")
	evidenceKeyEnv := fs.String("evidence-key-env", "", "environment variable holding the 32-byte evidence key in base64, instead of --evidence-key (the same on every replica)")
	rotateKeys := fs.Bool("rotate-keys", false, "adopt this daemon's --evidence-key and --signing-key for a store first written with other keys (a deliberate rotation; docs/operations.md); without it such a store is refused")
	maxInflight := fs.Int64("max-inflight-bytes", inflight.DefaultBytes, "budget of request bytes the daemon holds at once, gRPC and HTTP together; a request waits up to 1s for room, then fails with ResourceExhausted (HTTP 429); 0: no budget (docs/operations.md)")
	healthListen := fs.String("health-listen", "", "also serve the gRPC health service alone, in plaintext, on this address (for Kubernetes gRPC probes when the API needs TLS); empty: off")
	httpAllowedHosts := fs.String("http-allowed-hosts", "", "comma-separated host or host:port names the HTTP listener answers for besides localhost and loopback addresses (421 otherwise), e.g. verifierd.example.com; requests with the API token pass on any name")
	limits := connFlags(fs)
	checkpointEvery := fs.Uint64("ledger-checkpoint-every", session.DefaultCheckpointEvery, "sign a ledger checkpoint in the transaction of every Nth ledger entry (0: not by count; docs/receipts.md)")
	checkpointInterval := fs.Duration("ledger-checkpoint-interval", session.DefaultCheckpointInterval, "sign a checkpoint of the ledger head this often when entries were appended since the last one (0: not by time); one is also signed at shutdown and by every export")
	onFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := limits.check(); err != nil {
		return err
	}
	allowedHosts, err := httpapi.ParseHosts(*httpAllowedHosts)
	if err != nil {
		return err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "verifierd", Level: hclog.LevelFromString(*logLevel), JSONFormat: *logJSON, Output: os.Stderr})
	// Traces only when OTEL_EXPORTER_OTLP_ENDPOINT asks for them; the
	// spans still batched are flushed on the way out.
	shutdownTraces, err := tracing.Setup(context.Background(), "verifierd")
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTraces(ctx); err != nil {
			logger.Warn("flushing traces", "error", err)
		}
	}()
	if tracing.Enabled() {
		logger.Info("exporting traces over OTLP", "endpoint_env", tracing.EndpointEnv)
	}

	// The store first: a damaged one stops the daemon before anything
	// starts, with the message `verifierd store check` prints.
	st, storeKind, err := openBackend(*storeDSN, *storePasswordEnv, *dataDir, bolt.Options{NoSync: !*storeSync, InitStore: *initStore})
	if err != nil {
		return err
	}
	defer st.Close()
	evidenceKey, err := loadEvidence(*evidenceKeyEnv, *evidenceKeyFile, *dataDir)
	if err != nil {
		return err
	}
	signer, err := loadSigner(*signingKeyEnv, *dataDir, *signingKey)
	if err != nil {
		return err
	}
	// One fleet, one key set; and from here every stored value is checked
	// on read.
	if err := bindStore(context.Background(), st, evidenceKey, signer.KeyID(), *rotateKeys, logger); err != nil {
		return err
	}
	// At start nothing is in flight: every uncommitted baseline is an orphan.
	if stats, err := st.RemoveOrphans(context.Background(), time.Now(), *retain); err != nil {
		return fmt.Errorf("removing orphans from the store: %w", err)
	} else if stats != (store.Stats{}) {
		logger.Info("store: removed orphans", "orphan_baselines", stats.OrphanBaselines, "unfinished_sessions", stats.UnfinishedSessions)
	}
	maintainCtx, stopMaintain := context.WithCancel(context.Background())
	defer stopMaintain()
	removeExpired(context.Background(), st, *retainFinished, logger)
	go removeOrphansEvery(maintainCtx, st, orphanInterval(shortest(*retain, *retainFinished)), *retain, *retainFinished, logger)

	daemon := &config.Daemon{}
	if *configPath != "" {
		d, err := config.LoadDaemon(*configPath)
		if err != nil {
			return err
		}
		daemon = d
	}
	// Decide on exposure before starting anything.
	hasToken, hasTLS := daemon.API.BearerTokenEnv != "", daemon.API.TLSCertFile != ""
	warning, err := checkListenSecurity(*listen, hasToken, hasTLS, *insecure)
	if err != nil {
		return err
	}
	if warning != "" {
		logger.Warn(warning)
	}
	if *httpListen != "" {
		warning, err := checkListenSecurity(*httpListen, hasToken, hasTLS, *insecure)
		if err != nil {
			return fmt.Errorf("--http-listen: %w", err)
		}
		if warning != "" {
			logger.Warn("http listener: " + warning)
		}
	}
	workflows, err := session.LoadWorkflows(daemon)
	if err != nil {
		return err
	}
	if *allowInline {
		logger.Warn("--allow-inline-deployments: callers may send their own deployment and so choose where the daemon reads; a development switch, never for production")
	}
	if *builtinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the builtin adapter dir: %w (pass --builtin-dir)", err)
		}
		*builtinDir = filepath.Dir(exe)
	}
	pins := map[string]string{}
	for kind, p := range daemon.Plugins {
		pins[kind] = p.SHA256
	}
	mets := newMetrics()
	host, err := pluginhost.New(pluginhost.Options{BuiltinDir: *builtinDir, PluginDir: *pluginDir, Pins: pins, Logger: logger, Events: mets})
	if err != nil {
		return err
	}
	defer host.Close()
	watchDaemon(maintainCtx, mets, st, host)
	mets.Register(limits)

	// The API's listener is bound last (below); its connection limit is
	// built now, for the server options that go with it.
	grpcLim, grpcOpts := limits.grpcListener("grpc", nil)
	opts := server.Options{Logger: logger, Connection: grpcOpts, Budget: inflight.New(*maxInflight)}
	if env := daemon.API.BearerTokenEnv; env != "" {
		tok := os.Getenv(env)
		if tok == "" {
			return fmt.Errorf("api.bearer_token_env: environment variable %s is not set", env)
		}
		opts.BearerToken = tok
	}
	if daemon.API.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(daemon.API.TLSCertFile, daemon.API.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("api: loading the TLS key pair: %w", err)
		}
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	mgr := &session.Manager{Host: host, Store: st, Daemon: daemon, Logger: logger.Named("session"), Signer: signer, EvidenceKey: evidenceKey, AllowInline: *allowInline, Workflows: workflows, Metrics: mets}
	mgr.StartCheckpoints(maintainCtx, *checkpointEvery, *checkpointInterval)
	// Deferred before the listeners' stops, so it runs after them (and
	// before the store closes): nothing appends any more, and the head the
	// daemon leaves behind is signed.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownCheckpointTimeout)
		defer cancel()
		if seq, _, err := mgr.Checkpoint(ctx); err != nil {
			logger.Error("signing the ledger checkpoint at shutdown", "error", err)
		} else {
			logger.Info("signed the ledger checkpoint", "seq", seq)
		}
	}()
	srv, healthSrv := server.New(mgr, opts)
	if *healthListen != "" {
		stopHealth, err := serveHealth(*healthListen, healthSrv, limits, logger)
		if err != nil {
			return err
		}
		defer stopHealth()
	}
	go watchStore(maintainCtx, st, healthSrv, 5*time.Second, logger)
	rewards, err := startRewards(mgr, srv, logger.Named("reward"))
	if err != nil {
		return err
	}
	if *httpListen != "" {
		api, err := newHTTPAPI(opts.BearerToken, rewards, server.Service(mgr, logger), logger.Named("http"))
		if err != nil {
			return err
		}
		api.AllowHosts(allowedHosts)
		api.SetBudget(opts.Budget)
		registerObserve(api, mets, mgr)
		stopHTTP, err := serveHTTP(maintainCtx, *httpListen, api, opts.TLS, limits, logger)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}

	// Signals are handled before the daemon says it listens, so that a
	// supervisor's SIGTERM right after that line is never lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	grpcLim.Listener = lis
	logger.Info("verifierd listening", "addr", lis.Addr().String(), "max_connections", limits.maxConns, "data_dir", *dataDir, "store", storeKind, "kinds", host.Kinds(), "key_id", signer.KeyID())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(grpcLim) }()
wait:
	for {
		select {
		case err := <-errc:
			return err
		case <-usr1:
			freeMemory(logger)
		case s := <-sig:
			logger.Info("draining in-flight calls", "signal", s.String())
			break wait
		}
	}
	healthSrv.Shutdown()
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		logger.Warn("drain timed out; stopping")
		srv.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		logger.Debug("serve ended", "error", err)
	}
	logger.Info("stopped")
	return nil
}

// orphanInterval is how often the daemon looks for orphans: every 10
// minutes, or more often for a retention shorter than 20 minutes.
func orphanInterval(retain time.Duration) time.Duration {
	if retain > 0 && retain/2 < 10*time.Minute {
		return max(retain/2, time.Second)
	}
	return 10 * time.Minute
}

// removeOrphansEvery runs the store's orphan cleanup off the request path
// until ctx ends; each run works in small transactions.
func removeOrphansEvery(ctx context.Context, st store.Backend, every, retain, retainFinished time.Duration, logger hclog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stats, err := st.RemoveOrphans(ctx, time.Now(), retain)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("store: removing orphans", "error", err)
		case stats != (store.Stats{}):
			logger.Info("store: removed orphans", "orphan_baselines", stats.OrphanBaselines, "unfinished_sessions", stats.UnfinishedSessions)
		}
		removeExpired(ctx, st, retainFinished, logger)
	}
}

// shortest is the shorter of two retentions, a zero (keep) one not
// counting.
func shortest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// onFlags sees the daemon's flag set once every flag is registered (tests
// read it; see deploy/kubernetes).
var onFlags = func(*flag.FlagSet) {}

// shutdownCheckpointTimeout bounds signing and storing the ledger
// checkpoint at shutdown.
const shutdownCheckpointTimeout = 30 * time.Second

// freeMemory answers SIGUSR1: a forced GC that returns freed pages to the
// OS, so that resident memory shows what is really held.
func freeMemory(logger hclog.Logger) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	logger.Info("freed memory on SIGUSR1", "heap_alloc_bytes", ms.HeapAlloc, "heap_sys_bytes", ms.HeapSys, "goroutines", runtime.NumGoroutine())
}

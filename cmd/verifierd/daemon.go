package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/connlimit"
	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/server"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// daemon is a verifierd built from its options (newDaemon): the store and
// keys, the adapters, the session manager, the gRPC server and the side
// listeners (health, HTTP). serve runs it until a signal; close releases
// what newDaemon opened, last opened first.
type daemon struct {
	opts   *options
	logger hclog.Logger

	st          store.Backend
	storeKind   string
	signer      *signing.Signer
	evidenceKey []byte
	host        *pluginhost.Host
	mgr         *session.Manager
	srv         *grpc.Server
	healthSrv   *health.Server
	// grpcLim bounds the API listener; serve binds it last.
	grpcLim *connlimit.Listener
	// maintain ends the store maintenance and the checkpoints.
	maintain context.Context
	// fence stops serving once the store's keys are not this daemon's.
	fence keyFence
	// storeUp: the store answered its last check (verifierd_store_up).
	storeUp atomic.Bool

	closers []func()
}

// onClose adds a release to run at close, before the ones added earlier.
func (d *daemon) onClose(f func()) { d.closers = append(d.closers, f) }

// close releases everything newDaemon opened, last opened first.
func (d *daemon) close() {
	for _, release := range slices.Backward(d.closers) {
		release()
	}
	d.closers = nil
}

// newDaemon opens the store, loads the keys and the daemon config, starts
// the adapter host and builds the servers. On an error everything opened
// so far is released.
func newDaemon(o *options) (d *daemon, err error) {
	d = &daemon{opts: o}
	defer func() {
		if err != nil {
			d.close()
			d = nil
		}
	}()
	d.logger = hclog.New(&hclog.LoggerOptions{Name: "verifierd", Level: hclog.LevelFromString(o.LogLevel), JSONFormat: o.LogJSON, Output: os.Stderr})
	if err := d.startTracing(); err != nil {
		return d, err
	}
	if err := d.openStore(); err != nil {
		return d, err
	}
	daemonCfg, err := d.loadConfig()
	if err != nil {
		return d, err
	}
	workflows, err := session.LoadWorkflows(daemonCfg)
	if err != nil {
		return d, err
	}
	if o.AllowInlineDeployments {
		d.logger.Warn("--allow-inline-deployments: callers may send their own deployment and so choose where the daemon reads; a development switch, never for production")
	}
	mets := newMetrics()
	if err := d.startHost(daemonCfg, mets); err != nil {
		return d, err
	}
	mets.Register(o.Connections)

	// The API's listener is bound last (serve); its connection limit is
	// built now, for the server options that go with it.
	sopts, err := d.serverOptions(daemonCfg)
	if err != nil {
		return d, err
	}
	d.mgr, err = session.New(session.Options{Host: d.host, Store: d.st, Daemon: daemonCfg, Logger: d.logger.Named("session"),
		Signer: d.signer, EvidenceKey: d.evidenceKey, AllowInline: o.AllowInlineDeployments, Workflows: workflows, Metrics: mets})
	if err != nil {
		return d, err
	}
	d.mgr.Ledger().StartCheckpoints(d.maintain, o.LedgerCheckpointEvery, o.LedgerCheckpointInterval)
	// Released before the listeners' stops are, so it runs after them (and
	// before the store closes): nothing appends any more, and the head the
	// daemon leaves behind is signed.
	d.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownCheckpointTimeout)
		defer cancel()
		if seq, _, err := d.mgr.Ledger().Checkpoint(ctx); err != nil {
			d.logger.Error("signing the ledger checkpoint at shutdown", "error", err)
		} else {
			d.logger.Info("signed the ledger checkpoint", "seq", seq)
		}
	})
	d.srv, d.healthSrv = server.New(d.mgr, sopts)
	if err := d.startListeners(sopts, mets); err != nil {
		return d, err
	}
	return d, nil
}

// startTracing exports traces only when OTEL_EXPORTER_OTLP_ENDPOINT asks
// for them; the spans still batched are flushed at close.
func (d *daemon) startTracing() error {
	shutdownTraces, err := tracing.Setup(context.Background(), "verifierd")
	if err != nil {
		return err
	}
	d.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTraces(ctx); err != nil {
			d.logger.Warn("flushing traces", "error", err)
		}
	})
	if tracing.Enabled() {
		d.logger.Info("exporting traces over OTLP", "endpoint_env", tracing.EndpointEnv)
	}
	return nil
}

// openStore opens the store first: a damaged one stops the daemon before
// anything starts, with the message `verifierd store check` prints. It
// binds the keys to it, removes the orphans a stopped daemon left and
// starts the store's maintenance.
func (d *daemon) openStore() error {
	o := d.opts
	st, storeKind, err := openBackend(o.Store, o.StorePasswordEnv, o.DataDir, bolt.Options{NoSync: !o.StoreSync, InitStore: o.InitStore})
	if err != nil {
		return err
	}
	d.st, d.storeKind = st, storeKind
	d.onClose(func() { st.Close() })
	evidenceKey, err := loadEvidence(o.EvidenceKeyEnv, o.EvidenceKey, o.DataDir)
	if err != nil {
		return err
	}
	d.evidenceKey = evidenceKey
	signer, err := loadSigner(o.SigningKeyEnv, o.DataDir, o.SigningKey)
	if err != nil {
		return err
	}
	d.signer = signer
	// One fleet, one key set; and from here every stored value is checked
	// on read.
	if err := bindStore(context.Background(), st, evidenceKey, signer.KeyID(), o.RotateKeys, d.logger); err != nil {
		return err
	}
	// At start nothing is in flight: every uncommitted baseline is an orphan.
	if stats, err := st.RemoveOrphans(context.Background(), time.Now(), o.RetainUnfinished); err != nil {
		return fmt.Errorf("removing orphans from the store: %w", err)
	} else if stats != (store.Stats{}) {
		d.logger.Info("store: removed orphans", "orphan_baselines", stats.OrphanBaselines, "unfinished_sessions", stats.UnfinishedSessions)
	}
	maintainCtx, stopMaintain := context.WithCancel(context.Background())
	d.maintain = maintainCtx
	d.onClose(stopMaintain)
	removeExpired(context.Background(), st, o.Retain, d.logger)
	go removeOrphansEvery(maintainCtx, st, orphanInterval(shortest(o.RetainUnfinished, o.Retain)), o.RetainUnfinished, o.Retain, d.logger)
	return nil
}

// loadConfig reads --config (an empty config without one) and decides on
// the listeners' exposure before anything starts.
func (d *daemon) loadConfig() (*config.Daemon, error) {
	o := d.opts
	daemonCfg := &config.Daemon{}
	if o.Config != "" {
		c, err := config.LoadDaemon(o.Config)
		if err != nil {
			return nil, err
		}
		daemonCfg = c
	}
	hasToken, hasTLS := daemonCfg.API.BearerTokenEnv != "", daemonCfg.API.TLSCertFile != ""
	warning, err := checkListenSecurity(o.Listen, hasToken, hasTLS, o.Insecure)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		d.logger.Warn(warning)
	}
	if o.HTTPListen != "" {
		warning, err := checkListenSecurity(o.HTTPListen, hasToken, hasTLS, o.Insecure)
		if err != nil {
			return nil, fmt.Errorf("--http-listen: %w", err)
		}
		if warning != "" {
			d.logger.Warn("http listener: " + warning)
		}
	}
	return daemonCfg, nil
}

// startHost starts the adapter host over the builtin and customer adapter
// folders, with the config's pins.
func (d *daemon) startHost(daemonCfg *config.Daemon, mets *metrics.Metrics) error {
	builtinDir := d.opts.BuiltinDir
	if builtinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the builtin adapter dir: %w (pass --builtin-dir)", err)
		}
		builtinDir = filepath.Dir(exe)
	}
	pins := map[string]string{}
	for kind, p := range daemonCfg.Plugins {
		pins[kind] = p.SHA256
	}
	host, err := pluginhost.New(pluginhost.Options{BuiltinDir: builtinDir, PluginDir: d.opts.PluginDir, Pins: pins, Logger: d.logger, Events: mets})
	if err != nil {
		return err
	}
	d.host = host
	d.onClose(host.Close)
	watchDaemon(d.maintain, mets, d.st, host)
	kinds := slices.Sorted(maps.Keys(daemonCfg.Plugins))
	for _, a := range builtin.Adapters {
		kinds = append(kinds, a.Kind)
	}
	mets.Declare(slices.Sorted(maps.Keys(daemonCfg.Deployments)), kinds)
	return nil
}

// serverOptions are the gRPC server's options: the connection bounds, the
// request budget, the bearer token and TLS of the config's api section.
func (d *daemon) serverOptions(daemonCfg *config.Daemon) (server.Options, error) {
	grpcLim, grpcOpts := d.opts.Connections.grpcListener("grpc", nil)
	d.grpcLim = grpcLim
	opts := server.Options{Logger: d.logger, Connection: grpcOpts, Budget: inflight.New(d.opts.MaxInflightBytes), Ready: d.fence.Ready, MaxJudgeRecords: d.opts.MaxJudgeRecords, Pace: d.opts.Connections.messagePace()}
	if env := daemonCfg.API.BearerTokenEnv; env != "" {
		tok := os.Getenv(env)
		if tok == "" {
			return opts, fmt.Errorf("api.bearer_token_env: environment variable %s is not set", env)
		}
		opts.BearerToken = tok
	}
	if daemonCfg.API.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(daemonCfg.API.TLSCertFile, daemonCfg.API.TLSKeyFile)
		if err != nil {
			return opts, fmt.Errorf("api: loading the TLS key pair: %w", err)
		}
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return opts, nil
}

// startListeners serves the health listener (--health-listen), the reward
// service and the HTTP listener (--http-listen), and watches the store for
// the health service.
func (d *daemon) startListeners(opts server.Options, mets *metrics.Metrics) error {
	o, logger, mgr, srv := d.opts, d.logger, d.mgr, d.srv
	if o.HealthListen != "" {
		stopHealth, err := serveHealth(o.HealthListen, d.healthSrv, o.Connections, logger)
		if err != nil {
			return err
		}
		d.onClose(stopHealth)
	}
	go watchStore(d.maintain, d.st, d.healthSrv, &d.fence, &d.storeUp, o.StoreCheckInterval, logger)
	watchHealth(mets, &d.fence, &d.storeUp, opts.Budget)
	rewards, err := startRewards(mgr, d.st, d.signer, srv, logger.Named("reward"))
	if err != nil {
		return err
	}
	if o.HTTPListen != "" {
		api, err := newHTTPAPI(opts.BearerToken, rewards, server.Service(mgr, logger), server.Chain(opts))
		if err != nil {
			return err
		}
		api.AllowHosts(o.allowedHosts)
		api.SetBudget(opts.Budget)
		api.SetReady(d.fence.Ready)
		api.SetBodyLimits(o.Connections.bodyLimits())
		api.SetMaxJudgeRecords(opts.MaxJudgeRecords)
		registerObserve(api, mets, mgr, d.st)
		stopHTTP, err := serveHTTP(d.maintain, o.HTTPListen, api, opts.TLS, o.Connections, logger)
		if err != nil {
			return err
		}
		d.onClose(stopHTTP)
	}
	return nil
}

// serve binds the API's listener and serves it until SIGTERM or SIGINT,
// then drains the in-flight calls for at most --drain. SIGUSR1 frees
// memory.
func (d *daemon) serve() error {
	logger := d.logger
	// Signals are handled before the daemon says it listens, so that a
	// supervisor's SIGTERM right after that line is never lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	lis, err := net.Listen("tcp", d.opts.Listen)
	if err != nil {
		return err
	}
	d.grpcLim.Listener = lis
	logger.Info("verifierd listening", "addr", lis.Addr().String(), "max_connections", d.opts.Connections.maxConnections, "data_dir", d.opts.DataDir, "store", d.storeKind, "kinds", d.host.Kinds(), "key_id", d.signer.KeyID())

	errc := make(chan error, 1)
	go func() { errc <- d.srv.Serve(d.grpcLim) }()
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
	d.healthSrv.Shutdown()
	done := make(chan struct{})
	go func() { d.srv.GracefulStop(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Drain)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		logger.Warn("drain timed out; stopping")
		d.srv.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		logger.Debug("serve ended", "error", err)
	}
	logger.Info("stopped")
	return nil
}

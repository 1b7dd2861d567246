package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/verifierd/verifierd/internal/periodic"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/store/pg"
)

// openBackend opens the session store --store names: a postgres:// or
// postgresql:// DSN selects PostgreSQL (shared by replicas); empty (the
// default) or "bbolt" the embedded bbolt file in the data dir. Anything else
// is refused rather than taken for bbolt: a mistyped DSN must not leave one
// replica on a store of its own.
func openBackend(dsn, passwordEnv, dataDir string, opts bolt.Options) (store.Backend, string, error) {
	if dsn == "" || dsn == "bbolt" {
		if passwordEnv != "" {
			return nil, "", fmt.Errorf("--store-password-env %s is set but --store is not a postgres:// DSN; drop it or pass --store", passwordEnv)
		}
		st, err := bolt.OpenWith(dataDir, opts)
		return st, "bbolt", err
	}
	if !pg.IsDSN(dsn) {
		return nil, "", fmt.Errorf("--store must be empty or bbolt (the embedded store in --data-dir), or a PostgreSQL DSN postgres://USER@HOST:PORT/DATABASE")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := pg.Open(ctx, dsn, pg.Options{PasswordEnv: passwordEnv})
	if err != nil {
		return nil, "", pgFlagError(err)
	}
	return st, "postgres", nil
}

// pgFlagError names the flag behind a PostgreSQL store's error: the store
// package names no flags.
func pgFlagError(err error) error {
	if _, ok := errors.AsType[*pg.PasswordEnvError](err); ok {
		return fmt.Errorf("--store-password-env: %w", err)
	}
	return fmt.Errorf("--store: %w", err)
}

// loadEvidenceKey reads the evidence key from file when one is named (a
// key shared by replicas, e.g. a mounted Secret: the file may be a symlink
// but must be readable by its owner only), else from the data dir.
func loadEvidenceKey(file, dataDir string) ([]byte, error) {
	if file == "" {
		return session.LoadEvidenceKey(dataDir)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("--evidence-key: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("--evidence-key %s is not a regular file; it must hold the %d-byte evidence key", file, session.EvidenceKeySize)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("--evidence-key %s has mode %04o; others could read the evidence key: chmod 600 it (a Kubernetes Secret volume: defaultMode 0400)", file, fi.Mode().Perm())
	case fi.Size() != session.EvidenceKeySize:
		return nil, fmt.Errorf("--evidence-key %s holds %d bytes, not the %d of an evidence key (head -c %d /dev/urandom makes one)", file, fi.Size(), session.EvidenceKeySize, session.EvidenceKeySize)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--evidence-key: %w", err)
	}
	defer f.Close()
	key := make([]byte, session.EvidenceKeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("--evidence-key %s: %w", file, err)
	}
	return key, nil
}

// removeExpired runs the finished-session retention once, logging what it
// removed.
func removeExpired(ctx context.Context, st store.Backend, retain time.Duration, logger hclog.Logger) {
	n, err := st.RemoveExpired(ctx, time.Now(), retain)
	switch {
	case err != nil && ctx.Err() == nil:
		logger.Error("store: removing expired sessions", "error", err)
	case n > 0:
		logger.Info("store: removed expired sessions", "finished_sessions", n, "retain", retain.String())
	}
}

// serveHealth serves only the gRPC health service, in plaintext, on addr
// (--health-listen): what a Kubernetes gRPC probe can reach when the API
// itself requires TLS. It answers nothing else, and holds its own
// --max-connections.
func serveHealth(addr string, hs *health.Server, limits *connLimits, logger hclog.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-listen: %w", err)
	}
	lim, gopts := limits.grpcListener("health", lis)
	gs := grpc.NewServer(gopts...)
	healthpb.RegisterHealthServer(gs, hs)
	go func() {
		if err := gs.Serve(lim); err != nil {
			logger.Debug("health listener ended", "error", err)
		}
	}()
	logger.Info("health listener", "addr", lis.Addr().String())
	return gs.Stop, nil
}

// pinger is a store that can tell whether it is reachable (PostgreSQL).
type pinger interface {
	Ping(ctx context.Context) error
}

// keyFence is what a serving daemon knows of its store's keys: nil, or the
// *store.KeyMismatchError a check found. Once set it stays: the replica
// must be restarted with the store's keys. Ready is server.Options.Ready
// and the HTTP /health's readiness.
type keyFence struct{ err atomic.Pointer[error] }

func (f *keyFence) set(err error) { f.err.CompareAndSwap(nil, &err) }

// Ready is nil while the store records this daemon's keys.
func (f *keyFence) Ready() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// watchStore marks the VerifierService NOT_SERVING in the health service
// while a shared store does not answer, and SERVING again when it does, so
// that a readiness probe on that service takes the replica out of rotation
// (a liveness probe on the overall service "" is not affected). It also
// re-reads the key ids a shared store records (store.KeyWatcher): once
// they are not this daemon's, the fence is set for good (every call but
// health answers FailedPrecondition, /health 503) and the service stays
// NOT_SERVING. The embedded store has nothing to watch.
func watchStore(ctx context.Context, st store.Backend, hs *health.Server, fence *keyFence, up *atomic.Bool, every time.Duration, logger hclog.Logger) {
	up.Store(true)
	p, ok := st.(pinger)
	if !ok {
		return
	}
	kw, _ := st.(store.KeyWatcher)
	const service = "verifierd.verifier.v1.VerifierService"
	serving := true
	periodic.Every(ctx, every, func(ctx context.Context) {
		pctx, cancel := context.WithTimeout(ctx, every)
		err := p.Ping(pctx)
		if err == nil && kw != nil && fence.Ready() == nil {
			if kerr := kw.RecheckKeys(pctx); errors.As(kerr, new(*store.KeyMismatchError)) {
				fence.set(kerr)
				logger.Error("store: the key ids it records are no longer this daemon's; every call is refused until it is restarted with the store's keys", "error", kerr)
			} else {
				err = kerr
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if fence.Ready() != nil {
			err = fence.Ready()
		}
		up.Store(err == nil)
		switch {
		case err != nil && serving:
			logger.Error("store: not answering; VerifierService is NOT_SERVING until it does", "error", err)
			hs.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
			serving = false
		case err == nil && !serving:
			logger.Info("store: answering again; VerifierService is SERVING")
			hs.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
			serving = true
		}
	})
}

// keyFromEnv reads a base64 key of size bytes from the environment
// variable name (--signing-key-env, --evidence-key-env): the way a
// Kubernetes Secret reaches every replica (secretKeyRef) without a file
// whose mode the kubelet widens. The value is never logged.
func keyFromEnv(flagName, name string, size int) ([]byte, error) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s: environment variable %s is not set", flagName, name)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(key) != size {
		return nil, fmt.Errorf("%s: environment variable %s must hold %d bytes in base64 (head -c %d /dev/urandom | base64)", flagName, name, size, size)
	}
	return key, nil
}

// loadSigner is signing.LoadOrCreate, or the seed in --signing-key-env.
func loadSigner(env, dataDir, file string) (*signing.Signer, error) {
	if env == "" {
		return signing.LoadOrCreate(dataDir, file)
	}
	if file != "" {
		return nil, errors.New("--signing-key and --signing-key-env both name the signing key; pass one")
	}
	seed, err := keyFromEnv("--signing-key-env", env, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return signing.New(ed25519.NewKeyFromSeed(seed)), nil
}

// loadEvidence is loadEvidenceKey, or the key in --evidence-key-env.
func loadEvidence(env, file, dataDir string) ([]byte, error) {
	if env == "" {
		return loadEvidenceKey(file, dataDir)
	}
	if file != "" {
		return nil, errors.New("--evidence-key and --evidence-key-env both name the evidence key; pass one")
	}
	return keyFromEnv("--evidence-key-env", env, session.EvidenceKeySize)
}

// bindTimeout bounds Bind at start-up (a store written before value tags
// is sealed in it, value by value).
const bindTimeout = 10 * time.Minute

// bindStore ties the store to this daemon's keys (store.Backend.Bind): a
// store first written with other keys is refused unless rotate, naming the
// flags and the store's key ids; a store written before values carried
// tags is sealed as it stands.
func bindStore(ctx context.Context, st store.Backend, evidenceKey []byte, signingKeyID string, rotate bool, logger hclog.Logger) error {
	keys := store.Keys{EvidenceKeyID: store.EvidenceKeyID(evidenceKey), SigningKeyID: signingKeyID}
	ctx, cancel := context.WithTimeout(ctx, bindTimeout)
	defer cancel()
	rep, err := st.Bind(ctx, store.IntegrityKey(evidenceKey), keys, rotate)
	if errors.Is(err, pg.ErrReplicaRunning) {
		return fmt.Errorf("--rotate-keys: %w; stop every replica of the store, start this one with --rotate-keys, then the others with its --evidence-key and --signing-key", err)
	}
	if _, ok := errors.AsType[*store.KeyMismatchError](err); ok {
		return fmt.Errorf("%w: start every replica with the --evidence-key and --signing-key (or --evidence-key-env, --signing-key-env) of the store's first writer, "+
			"or, to change keys deliberately, start one daemon with --rotate-keys", err)
	}
	if err != nil {
		return err
	}
	if rep.FirstWriter {
		logger.Info("store: recorded this daemon's keys as the store's", "evidence_key_id", keys.EvidenceKeyID, "signing_key_id", keys.SigningKeyID)
	}
	if rep.Sealed > 0 {
		logger.Warn("store: values written before integrity checks were sealed as they stood; from now on every read checks them", "values", rep.Sealed)
	}
	if rep.Rotated {
		logger.Warn("store: --rotate-keys: the store now records this daemon's keys", "evidence_key_id", keys.EvidenceKeyID, "signing_key_id", keys.SigningKeyID, "values_resealed", rep.Resealed)
	} else if rotate {
		logger.Info("store: --rotate-keys: the store already records this daemon's keys; nothing to rotate")
	}
	return nil
}

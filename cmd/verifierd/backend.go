package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/pgstore"
)

// openBackend opens the session store --store names: a postgres:// or
// postgresql:// DSN selects PostgreSQL (shared by replicas), anything else
// (the default, empty) the embedded bbolt file in the data dir.
func openBackend(dsn, passwordEnv, dataDir string, opts store.Options) (store.Backend, string, error) {
	if dsn == "" {
		if passwordEnv != "" {
			return nil, "", fmt.Errorf("--store-password-env %s is set but --store is not a postgres:// DSN; drop it or pass --store", passwordEnv)
		}
		st, err := store.OpenWith(dataDir, opts)
		return st, "bbolt", err
	}
	if !pgstore.IsDSN(dsn) {
		return nil, "", fmt.Errorf("--store must be empty (the embedded store in --data-dir) or a postgres:// DSN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{PasswordEnv: passwordEnv})
	return st, "postgres", err
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

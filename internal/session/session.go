// Package session runs the verification lifecycle (docs/daemon.md, "The session lifecycle"): Begin binds
// the contracts, configures the deployment's candidates, selects the
// strongest tier per effect, captures each selected adapter's baseline once
// and persists it; Verify reads through the pinned adapters only, polls until
// settled, judges, lets the adapter demote (never promote), redacts,
// persists and returns the result. A verified session answers the recorded
// result forever after.
//
// The Manager holds the daemon's parts (host, store, config, keys) and runs
// the lifecycle; each concern beside it is a small collaborator of its own
// file: configure.go (configurer: a deployment's candidates into adapter
// instances, secrets resolved under secrets.allow), evidencekey.go
// (evidenceKeys: the key of every keyed digest, read digest and hidden
// baseline value), signer.go (receiptSigner: receipts and checkpoints),
// reward_oracle.go (RewardOracle: reward contracts and their reads). The
// lifecycle itself: begin.go, parse.go, baseline.go and census.go for
// Begin; verify.go, group.go and read.go for Verify; reverify.go,
// artifact.go and preflight.go for the other calls; receipts.go and
// refused.go for what the ledger binds; errors.go for refusals.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// Manager runs sessions.
type Manager struct {
	Host   *pluginhost.Host
	Store  store.Backend
	Daemon *config.Daemon
	// LookupEnv resolves secret references (os.LookupEnv by default).
	LookupEnv func(string) (string, bool)
	// Clock drives settlement polling (the wall clock by default).
	Clock  judge.Clock
	Logger hclog.Logger
	// PollInterval is the first wait between after reads (judge default
	// when zero).
	PollInterval time.Duration
	// EvidenceKey keys task digests, the hidden values of stored baselines
	// and the evidence digests of receipts (LoadEvidenceKey); a Manager
	// without one uses a random key of its own lifetime.
	EvidenceKey []byte
	// Signer signs every receipt; without one, results carry no receipt
	// (the ledger is kept all the same).
	Signer *signing.Signer
	// AllowInline accepts deployments sent by the caller (the development
	// switch --allow-inline-deployments). Even then an inline deployment
	// may carry no secret, compensator or policy.
	AllowInline bool
	// Workflows are the registered workflows, loaded at start
	// (LoadWorkflows), by their name in the daemon config.
	Workflows map[string]*workflow.Workflow
	// Metrics records Begin and Verify (observe.go); nil: none.
	Metrics *metrics.Metrics

	locks    keyedMutex // serialises Verify per session id
	keysOnce sync.Once
	keys     evidenceKeys // without EvidenceKey (evidence)
}

func (m *Manager) lookupEnv(name string) (string, bool) {
	if m.LookupEnv != nil {
		return m.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

func (m *Manager) clock() judge.Clock {
	if m.Clock != nil {
		return m.Clock
	}
	return wallClock{}
}

func (m *Manager) logger() hclog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return hclog.NewNullLogger()
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "ses_" + hex.EncodeToString(b[:])
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

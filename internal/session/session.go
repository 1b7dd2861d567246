// Package session runs the verification lifecycle (docs/daemon.md, "The session lifecycle"): Begin binds
// the contracts, configures the deployment's candidates, selects the
// strongest tier per effect, captures each selected adapter's baseline once
// and persists it; Verify reads through the pinned adapters only, polls until
// settled, judges, lets the adapter demote (never promote), redacts,
// persists and returns the result. A verified session answers the recorded
// result forever after.
//
// The Manager, made once by New from Options, holds the daemon's parts
// (host, store, config, keys) and runs the lifecycle. Each concern beside
// it is a small collaborator with a constructor of its own: deployments
// (begin.go, trust.go: a registered or inline deployment under the trust
// rule), configurer (configure.go: a deployment's candidates into adapter
// instances, secrets resolved under secrets.allow), evidenceKeys
// (evidencekey.go: the key of every keyed digest, read digest and hidden
// baseline value), receiptSigner (signer.go: receipts and checkpoint
// envelopes), checkpointer (checkpoint.go: the ledger's signed checkpoints
// and exports), afterReader (read.go: an adapter's after read, digested as
// it streams), and, built from those, preflight (preflight.go:
// TestConnection), artifactVerifier (artifact.go: VerifyArtifact) and
// RewardOracle (reward_oracle.go: reward contracts and their reads). The
// lifecycle itself: begin.go, parse.go, baseline.go and census.go for
// Begin; verify.go, group.go and read.go for Verify; reverify.go for
// Reverify; receipts.go and refused.go for what the ledger binds;
// errors.go for refusals. Runs are a service of their own (internal/runs),
// which reaches sessions only through RunHost (runhost.go,
// runhost_reread.go).
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
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

// Options are what a Manager is made of (New). Store and Host are
// required; every other field has the default its comment gives.
type Options struct {
	// Host runs the adapters (required).
	Host *pluginhost.Host
	// Store keeps sessions, baselines and the ledger (required).
	Store store.Backend
	// Daemon is the daemon config: registered deployments, workflows,
	// reward contracts, secrets.allow and the policy. Nil: none of them
	// (only inline deployments, under AllowInline).
	Daemon *config.Daemon
	// LookupEnv resolves secret references (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
	// Clock drives settlement polling (the wall clock when nil).
	Clock judge.Clock
	// Logger receives the lifecycle's log lines (none when nil).
	Logger hclog.Logger
	// PollInterval is the first wait between after reads (the judge's
	// default when zero).
	PollInterval time.Duration
	// EvidenceKey keys task digests, the hidden values of stored baselines
	// and the evidence digests of receipts (LoadEvidenceKey); it must be
	// EvidenceKeySize bytes. Without one the Manager uses a random key of
	// its own lifetime (tests).
	EvidenceKey []byte
	// Signer signs every receipt and checkpoint; without one, results
	// carry no receipt (the ledger is kept all the same).
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
}

// Manager runs sessions. Make one with New.
type Manager struct {
	host      *pluginhost.Host
	store     store.Backend
	daemon    *config.Daemon // may be nil
	lookupEnv func(string) (string, bool)
	clock     judge.Clock
	// holdStore keeps the write set's holds in the store (writeset_holds.go).
	holdStore    holdStore
	logger       hclog.Logger
	pollInterval time.Duration
	signer       *signing.Signer // may be nil
	allowInline  bool
	workflows    map[string]*workflow.Workflow
	metrics      *metrics.Metrics // may be nil

	keys evidenceKeys // the evidence key, or a random one (evidencekey.go)
	// writeSets are the change-log sources of changes: candidates
	// (writeset.go).
	writeSets *writeSetSources
	locks     keyedMutex // serialises Verify per session id
	runHost   *RunHost   // what the runs service reaches (runhost.go)
}

// New checks o once and makes the Manager: a missing store or host, or an
// evidence key of the wrong length, is refused.
func New(o Options) (*Manager, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("session.New: Options.Store is nil; open the session store first (store.Open) and pass it")
	case o.Host == nil:
		return nil, errors.New("session.New: Options.Host is nil; start the plugin host first (pluginhost.New) and pass it")
	case len(o.EvidenceKey) > 0 && len(o.EvidenceKey) != EvidenceKeySize:
		return nil, fmt.Errorf("session.New: Options.EvidenceKey holds %d bytes, not %d; load it with LoadEvidenceKey", len(o.EvidenceKey), EvidenceKeySize)
	case o.PollInterval < 0:
		return nil, fmt.Errorf("session.New: Options.PollInterval is %v; give a positive interval, or zero for the judge's default", o.PollInterval)
	}
	m := &Manager{host: o.Host, store: o.Store, daemon: o.Daemon, lookupEnv: o.LookupEnv, clock: o.Clock,
		logger: o.Logger, pollInterval: o.PollInterval, signer: o.Signer, allowInline: o.AllowInline,
		workflows: o.Workflows, metrics: o.Metrics, keys: newEvidenceKeys(o.EvidenceKey), writeSets: newWriteSetSources()}
	if m.lookupEnv == nil {
		m.lookupEnv = os.LookupEnv
	}
	if m.clock == nil {
		m.clock = wallClock{}
	}
	if m.logger == nil {
		m.logger = hclog.NewNullLogger()
	}
	m.runHost = &RunHost{m: m}
	m.holdStore = holdStore{m.store, m.clock, m.logger}
	return m, nil
}

// RunHost is what the runs service (internal/runs) reaches of the
// Manager's sessions (runhost.go).
func (m *Manager) RunHost() *RunHost { return m.runHost }

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

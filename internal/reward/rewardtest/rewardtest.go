// Package rewardtest builds a reward service over an in-memory oracle for
// the API-layer tests (gRPC and HTTP): the MockMed contract, certified by
// the test's own key. Tests against real systems of record are in
// internal/session.
package rewardtest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/judge"
)

// MockMed's contract files.
const (
	Contract = `schema: verifierd.reward-contract/v1
id: mockmed-triage
version: "1"
deployment: mockmed
identity_keys: [patient_id]
components: [{name: terminal_effect, weight: 1}]
scoring: {wrong_effect_reward: 0.0}
certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}
`
	Required = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  expected_count: 1
  count_new_only: true
`
	Forbidden = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Discharge}
  expected_count: 1
`
)

// Oracle is an in-memory encounters table at a fixed tier.
type Oracle struct {
	mu          sync.Mutex
	rows        []judge.Record
	next        int
	Tier        int
	Unreachable bool
}

// Add writes one encounter, as the rollout would.
func (o *Oracle) Add(patient, typ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.rows = append(o.rows, judge.Record{"id": json.Number(fmt.Sprint(o.next)), "patient_id": patient, "type": typ, "status": "saved"})
}

// Read implements reward.Oracle.
// Its one candidate is pinned as index 0.
func (o *Oracle) Read(context.Context, string, []*judge.Contract, map[string]string, string, *reward.OraclePin) reward.OracleRead {
	o.mu.Lock()
	defer o.mu.Unlock()
	pin := &reward.OraclePin{Kind: "mem", Tier: o.Tier, ConfigDigest: "sha256:mem"}
	if o.Unreachable {
		return reward.OracleRead{Tier: o.Tier, Kind: "mem", Pin: pin, Snapshot: judge.Snapshot{Reason: "store offline"}}
	}
	return reward.OracleRead{Tier: o.Tier, Kind: "mem", Pin: pin, Snapshot: judge.Snapshot{Reachable: true, Records: append([]judge.Record(nil), o.rows...)}}
}

// Judge implements reward.Oracle through the daemon's one judging path.
// An in-memory table belongs to no deployment: no census, freshness or
// absence rule applies.
func (o *Oracle) Judge(_ string, _ *reward.OraclePin, effects []*judge.Contract, before, after reward.OracleRead) reward.Proof {
	return session.RewardOracle{}.Judge("", nil, effects, before, after)
}

// Rig is a certified MockMed service.
type Rig struct {
	Service *reward.Service
	Oracle  *Oracle
	Signer  *signing.Signer
	Digest  string
	// DataDir holds the store; Reopen opens it again (a daemon restart).
	DataDir string
}

// New builds the rig; the store closes with the test.
func New(t testing.TB) *Rig {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{reward.ContractFile: Contract, reward.RequiredFile: Required, reward.ForbiddenFile: Forbidden} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := signing.New(priv)
	trust := reward.Trust{Keys: map[string][]byte{signer.KeyID(): signer.PublicKey()}}
	c, err := reward.LoadContract("mockmed", dir, trust)
	if err != nil {
		t.Fatal(err)
	}
	r := &Rig{Oracle: &Oracle{Tier: 1}, Signer: signer, DataDir: t.TempDir()}
	r.Reopen(t, map[string]*reward.Contract{"mockmed": c})
	cal, err := r.Service.Calibrate(t.Context(), "mockmed", 300, 0.05, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, reward.CertificateFile), cal.CertificateJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = reward.LoadContract("mockmed", dir, trust); err != nil {
		t.Fatal(err)
	}
	r.Service.Contracts = map[string]*reward.Contract{"mockmed": c}
	r.Digest = c.Digest
	return r
}

// Reopen closes the store (if open) and opens it again.
func (r *Rig) Reopen(t testing.TB, contracts map[string]*reward.Contract) {
	t.Helper()
	if r.Service != nil {
		r.Service.Store.Close()
		contracts = r.Service.Contracts
	}
	st, err := bolt.Open(r.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r.Service = &reward.Service{Contracts: contracts, Oracle: r.Oracle, Store: st, Signer: r.Signer, EvidenceKey: []byte("evidence")}
}

// Descriptor is a descriptor for episode with extra JSON members appended.
func (r *Rig) Descriptor(episode, checkpoint string, update int64, extra string) string {
	return fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": %q, "policy_update": %d, "reward_contract_digest": %q%s}`, episode, checkpoint, update, r.Digest, extra)
}

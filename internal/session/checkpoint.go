package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// Defaults of the ledger checkpoints (verifierd --ledger-checkpoint-every,
// --ledger-checkpoint-interval; docs/receipts.md).
const (
	DefaultCheckpointEvery    = 64
	DefaultCheckpointInterval = 10 * time.Second
)

// signCheckpoint signs the checkpoint of the ledger whose entry seq hashes
// to head (receipt.PayloadTypeCheckpoint) and returns the envelope JSON.
func (m *Manager) signCheckpoint(seq uint64, head string) ([]byte, error) {
	ref := m.signerRef()
	payload, err := json.Marshal(receipt.Checkpoint{Seq: seq, Head: head, At: time.Now().UTC(),
		Signer: &receipt.Signer{PublicKey: ref.PublicKey, KeyID: ref.KeyID}})
	if err != nil {
		return nil, err
	}
	return json.Marshal(m.Signer.Sign(receipt.PayloadTypeCheckpoint, payload))
}

// Checkpoint returns a signed checkpoint covering the ledger as it is now:
// the newest stored one when no entry was appended after it, else a new one
// of the current head, signed and stored. Its seq is the last entry it
// covers (0 for an empty ledger). Without a signer it returns no envelope.
func (m *Manager) Checkpoint() (seq uint64, envelope []byte, err error) {
	return m.checkpoint(true)
}

// checkpoint is Checkpoint; an empty ledger is signed only when empty is
// true (an export asks for it; the timer does not).
func (m *Manager) checkpoint(empty bool) (uint64, []byte, error) {
	if m.Signer == nil || m.Store == nil {
		return 0, nil, nil
	}
	pos, err := m.Store.LedgerHead()
	if err != nil {
		return 0, nil, err
	}
	seq := pos.Seq - 1
	have, env, err := m.Store.LatestCheckpoint()
	if err != nil {
		return 0, nil, err
	}
	// Another replica may have appended and checkpointed since the head
	// was read: its checkpoint covers at least as much.
	if env != nil && have >= seq {
		return have, env, nil
	}
	if seq == 0 && !empty {
		return 0, nil, nil
	}
	env, err = m.signCheckpoint(seq, pos.Head)
	if err != nil {
		return 0, nil, err
	}
	return seq, env, m.Store.PutCheckpoint(seq, env)
}

// StartCheckpoints makes the ledger carry signed checkpoints: one in the
// transaction of every every-th entry (0: none by count), and, from a
// goroutine of its own until ctx ends, one of the current head every
// interval when entries were appended since the newest (0: none by time).
// The caller signs one more at shutdown (Checkpoint).
func (m *Manager) StartCheckpoints(ctx context.Context, every uint64, interval time.Duration) {
	if m.Signer == nil || m.Store == nil {
		return
	}
	if every > 0 {
		m.Store.SignCheckpoints(&store.Checkpointing{Every: every, Sign: m.signCheckpoint})
	}
	if interval > 0 {
		go m.checkpointEvery(ctx, interval)
	}
}

func (m *Manager) checkpointEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, _, err := m.checkpoint(false); err != nil && ctx.Err() == nil {
			m.logger().Error("signing a ledger checkpoint", "error", err)
		}
	}
}

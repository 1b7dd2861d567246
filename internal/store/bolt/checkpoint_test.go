package bolt

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/receipt"

	"github.com/verifierd/verifierd/internal/store"
)

// signer signs checkpoints with a fresh key, as the daemon does.
func signer(t *testing.T) (ed25519.PublicKey, store.CheckpointSigner) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	return pub, func(seq uint64, head string) ([]byte, error) {
		env, err := receipt.SignCheckpoint(priv, seq, head, time.Now())
		if err != nil {
			return nil, err
		}
		return json.Marshal(env)
	}
}

// openCheckpoint decodes and checks a stored checkpoint envelope.
func openCheckpoint(t *testing.T, pub ed25519.PublicKey, raw []byte) receipt.Checkpoint {
	t.Helper()
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := env.Open(pub)
	if err != nil || env.PayloadType != receipt.PayloadTypeCheckpoint {
		t.Fatalf("stored checkpoint (%s): %v", env.PayloadType, err)
	}
	var c receipt.Checkpoint
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheckpointsEveryNthEntry: every 4th entry commits with a signed
// checkpoint of its own hash, whatever write appends it; a rolled back
// append leaves none; a stored checkpoint is never replaced and survives
// a reopen.
func TestCheckpointsEveryNthEntry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if seq, env, err := s.LatestCheckpoint(t.Context()); err != nil || seq != 0 || env != nil {
		t.Fatalf("a new store has a checkpoint: %d %s %v", seq, env, err)
	}
	pub, sign := signer(t)
	s.SignCheckpoints(&store.Checkpointing{Every: 4, Sign: sign})
	for i := range 9 {
		var err error
		switch i % 3 {
		case 0:
			err = s.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("begin", "s", "sha256:aa"); return err })
		case 1:
			_, err = s.PutReceipt(t.Context(), "r", func(l store.Ledger) ([]byte, error) {
				_, err := l.Append("receipt", "s", "sha256:bb")
				return []byte("{}"), err
			})
		default:
			err = s.RewardUpdate(t.Context(), func(tx store.RewardTx) error { _, err := tx.Ledger().Append("reward", "s", "sha256:cc"); return err })
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var entries []receipt.Entry
	if err := s.ExportLedger(t.Context(), 0, func(e receipt.Entry, _ []byte) error { entries = append(entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	seq, env, err := s.LatestCheckpoint(t.Context())
	if err != nil || seq != 8 {
		t.Fatalf("latest checkpoint at seq %d (%v), want 8", seq, err)
	}
	if c := openCheckpoint(t, pub, env); c.Seq != 8 || c.Head != entries[7].Hash() {
		t.Fatalf("checkpoint %+v, want seq 8 at %s", c, entries[7].Hash())
	}
	// Entries 10 to 12 in a transaction that fails: no checkpoint 12.
	boom := errors.New("boom")
	if err := s.AppendLedger(t.Context(), func(l store.Ledger) error {
		for range 3 {
			if _, err := l.Append("begin", "s", "sha256:dd"); err != nil {
				return err
			}
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing append: %v", err)
	}
	if seq, _, _ := s.LatestCheckpoint(t.Context()); seq != 8 {
		t.Fatalf("a rolled back append left checkpoint %d", seq)
	}
	// The daemon's timer and exports store further ones; seq 8 stays.
	if err := s.PutCheckpoint(t.Context(), 9, []byte(`{"n":9}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckpoint(t.Context(), 8, []byte(`{"n":"other"}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if seq, env, err := s.LatestCheckpoint(t.Context()); err != nil || seq != 9 || string(env) != `{"n":9}` {
		t.Fatalf("after reopen: %d %s %v", seq, env, err)
	}
	if err := s.view(t.Context(), func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketCheckpoints).Get(binary.BigEndian.AppendUint64(nil, 8))
		openCheckpoint(t, pub, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Without SignCheckpoints (nil), appends sign nothing.
	s.SignCheckpoints(nil)
	for range 8 {
		if err := s.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("begin", "s", "sha256:ee"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if seq, _, _ := s.LatestCheckpoint(t.Context()); seq != 9 {
		t.Fatalf("checkpoint %d without checkpointing", seq)
	}
}

package session

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// TestCheckpointCoversTheHead: Checkpoint signs the head once and returns
// the stored checkpoint while no entry follows it; StartCheckpoints signs
// in the transaction of every Nth entry; the timer skips an empty ledger.
func TestCheckpointCoversTheHead(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := signedManager(t, &memAdapter{kind: "checkpoint-test", tier: 1, table: tab})
	open := func(raw []byte) receipt.Checkpoint {
		t.Helper()
		env, err := receipt.ParseEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := env.Open(m.signer.PublicKey())
		if err != nil || env.PayloadType != receipt.PayloadTypeCheckpoint {
			t.Fatalf("checkpoint %s: %v", env.PayloadType, err)
		}
		var c receipt.Checkpoint
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The timer's checkpoint of an empty ledger: none.
	if seq, env, err := m.Ledger().c.checkpoint(t.Context(), false); err != nil || seq != 0 || env != nil {
		t.Fatalf("timer on an empty ledger: %d %s %v", seq, env, err)
	}
	ctx := t.Context()
	m.Ledger().StartCheckpoints(ctx, 2, 0)
	dep := []byte("effects: {kind: checkpoint-test, newness: whole_read}\n")
	res, err := m.Begin(ctx, BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "v"})
	if _, err := m.Verify(ctx, res.SessionID); err != nil {
		t.Fatal(err)
	}
	entries := ledgerOf(t, m) // begin, verify, receipt
	if seq, env, _ := m.store.LatestCheckpoint(ctx); seq != 2 || open(env).Head != entries[1].Hash() {
		t.Fatalf("every 2nd entry: latest checkpoint %d, want 2", seq)
	}
	seq, env, err := m.Ledger().Checkpoint(ctx)
	c := open(env)
	if err != nil || seq != 3 || c.Seq != 3 || c.Head != entries[2].Hash() || c.Signer.KeyID != m.signer.KeyID() {
		t.Fatalf("Checkpoint: %d %+v %v", seq, c, err)
	}
	time.Sleep(time.Millisecond)
	if _, again, _ := m.Ledger().Checkpoint(ctx); string(again) != string(env) {
		t.Errorf("a second Checkpoint of the same head signed again")
	}
}

// TestCheckpointRefusesADivergedLedger: when the entry of the newest
// checkpoint no longer hashes to its signed head (the store was changed
// behind the daemon's back), no new checkpoint is signed over it.
func TestCheckpointRefusesADivergedLedger(t *testing.T) {
	t.Parallel()
	m := signedManager(t)
	appendOne := func() {
		t.Helper()
		if err := m.store.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("begin", "s", "sha256:aa"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	appendOne()
	if seq, _, err := m.Ledger().Checkpoint(t.Context()); err != nil || seq != 2 {
		t.Fatalf("honest checkpoint: %d %v", seq, err)
	}
	appendOne()
	if seq, _, err := m.Ledger().Checkpoint(t.Context()); err != nil || seq != 3 {
		t.Fatalf("a checkpoint chained onto the last: %d %v", seq, err)
	}
	// A checkpoint of seq 4 whose head is not entry 4's, then entry 5.
	appendOne()
	env, err := newReceiptSigner(m.signer).checkpoint(4, "sha256:"+strings.Repeat("00", 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.store.PutCheckpoint(t.Context(), 4, env); err != nil {
		t.Fatal(err)
	}
	appendOne()
	if _, _, err := m.Ledger().Checkpoint(t.Context()); !errors.Is(err, ErrLedgerDiverged) || !strings.Contains(err.Error(), "seq 4") {
		t.Fatalf("diverged ledger: %v, want ErrLedgerDiverged naming seq 4", err)
	}
	if seq, _, _ := m.store.LatestCheckpoint(t.Context()); seq != 4 {
		t.Fatalf("a checkpoint %d was signed over the diverged ledger", seq)
	}
}

// TestCheckpointer: made without a key the checkpointer signs nothing and
// exports the whole ledger; with one, its timer signs the head of a ledger
// that grew, and an export stops at the checkpoint it signed.
func TestCheckpointer(t *testing.T) {
	t.Parallel()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	appendOne := func() {
		t.Helper()
		if err := st.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("begin", "s", "sha256:aa"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	appendOne()
	unsigned := newCheckpointer(st, nil, hclog.NewNullLogger())
	if seq, env, err := unsigned.checkpoint(t.Context(), true); err != nil || seq != 0 || env != nil {
		t.Fatalf("unsigned checkpoint: %d %s %v, want none", seq, env, err)
	}
	var seen []uint64
	env, err := unsigned.export(t.Context(), 1, func(e receipt.Entry, _ []byte) error { seen = append(seen, e.Seq); return nil })
	if err != nil || env != nil || len(seen) != 2 {
		t.Fatalf("unsigned export: entries %v, envelope %s, %v; want 2 entries and no envelope", seen, env, err)
	}

	_, priv, _ := ed25519.GenerateKey(nil)
	c := newCheckpointer(st, signing.New(priv), hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c.start(ctx, 0, 5*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if seq, _, _ := st.LatestCheckpoint(t.Context()); seq == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer signed no checkpoint of seq 2 within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	appendOne()
	seen = nil
	env, err = c.export(t.Context(), 1, func(e receipt.Entry, _ []byte) error { seen = append(seen, e.Seq); return nil })
	if err != nil || env == nil || len(seen) != 3 {
		t.Fatalf("signed export: entries %v, envelope %v, %v; want 3 entries and a checkpoint", seen, env != nil, err)
	}
	if seq, _, _ := st.LatestCheckpoint(t.Context()); seq != 3 {
		t.Errorf("the export's checkpoint is of seq %d, want 3", seq)
	}
	stop := errors.New("stop")
	if _, err := c.export(t.Context(), 1, func(receipt.Entry, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an export whose send fails: %v, want that error", err)
	}
}

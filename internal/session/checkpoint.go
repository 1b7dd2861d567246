package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/periodic"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// Defaults of the ledger checkpoints (verifierd --ledger-checkpoint-every,
// --ledger-checkpoint-interval; docs/receipts.md).
const (
	DefaultCheckpointEvery    = 64
	DefaultCheckpointInterval = 10 * time.Second
)

// checkpointer signs the ledger's checkpoints (docs/receipts.md): on
// demand, in the transaction of every Nth entry, and on a timer. Made
// without a signing key it signs nothing and exports the whole ledger.
type checkpointer struct {
	store  store.Backend
	signer *signing.Signer // may be nil
	logger hclog.Logger
}

// newCheckpointer checkpoints st's ledger with signer (which may be nil),
// logging the timer's failures to logger.
func newCheckpointer(st store.Backend, signer *signing.Signer, logger hclog.Logger) checkpointer {
	return checkpointer{store: st, signer: signer, logger: logger}
}

// Ledger is the Manager's ledger service: signed checkpoints of the
// ledger and its export (Manager.Ledger).
type Ledger struct{ c checkpointer }

// Ledger is the Manager's ledger service, over its store and signer.
func (m *Manager) Ledger() *Ledger {
	return &Ledger{c: newCheckpointer(m.store, m.signer, m.logger)}
}

// Checkpoint returns a signed checkpoint covering the ledger as it is now:
// the newest stored one when no entry was appended after it, else a new one
// of the current head, signed and stored. Its seq is the last entry it
// covers (0 for an empty ledger). Without a signer it returns no envelope.
func (l *Ledger) Checkpoint(ctx context.Context) (seq uint64, envelope []byte, err error) {
	return l.c.checkpoint(ctx, true)
}

// checkpoint is Checkpoint; an empty ledger is signed only when empty is
// true (an export asks for it; the timer does not).
func (c checkpointer) checkpoint(ctx context.Context, empty bool) (uint64, []byte, error) {
	if c.signer == nil {
		return 0, nil, nil
	}
	pos, err := c.store.LedgerHead(ctx)
	if err != nil {
		return 0, nil, err
	}
	seq := pos.Seq - 1
	have, env, err := c.store.LatestCheckpoint(ctx)
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
	if env != nil {
		if err := c.checkContinuity(ctx, have, env, seq); err != nil {
			return 0, nil, err
		}
	}
	env, err = newReceiptSigner(c.signer).checkpoint(seq, pos.Head)
	if err != nil {
		return 0, nil, err
	}
	return seq, env, c.store.PutCheckpoint(ctx, seq, env)
}

// ExportLedger calls fn with each ledger entry from seq from on, up to a
// signed checkpoint of the head as it is when the export starts (signed
// now if the head moved since the newest one, as Checkpoint), and returns
// that checkpoint's envelope: an export ends exactly at the checkpoint of
// its last entry; entries appended meanwhile belong to the next export.
// Without a signer it sends the whole ledger and returns no envelope. An
// error of fn ends the export and is returned.
func (l *Ledger) ExportLedger(ctx context.Context, from uint64, fn func(e receipt.Entry, canonical []byte) error) ([]byte, error) {
	return l.c.export(ctx, from, fn)
}

// export is ExportLedger.
func (c checkpointer) export(ctx context.Context, from uint64, fn func(e receipt.Entry, canonical []byte) error) ([]byte, error) {
	upTo, env, err := c.checkpoint(ctx, true)
	if err != nil {
		return nil, err
	}
	if env == nil {
		upTo = math.MaxUint64 // no signer: the whole ledger, unsigned
	}
	done := errors.New("export done")
	err = c.store.ExportLedger(ctx, from, func(e receipt.Entry, canonical []byte) error {
		if e.Seq > upTo {
			return done
		}
		return fn(e, canonical)
	})
	if err != nil && !errors.Is(err, done) {
		return nil, err
	}
	return env, nil
}

// ErrLedgerDiverged is the stored ledger no longer chaining onto the newest
// checkpoint the daemon signed: an entry it covers, or one after it, was
// changed in the store. The daemon then signs nothing over it.
var ErrLedgerDiverged = errors.New("the stored ledger no longer chains onto its newest signed checkpoint")

// checkContinuity checks, before a new checkpoint is signed over entries
// up to upTo, that the entry of the newest checkpoint (at seq have, env)
// still hashes to its signed head and that every entry after it chains
// onto it, so that the daemon never signs over a ledger changed in the
// store behind its back.
func (c checkpointer) checkContinuity(ctx context.Context, have uint64, env []byte, upTo uint64) error {
	e, err := receipt.ParseEnvelope(env)
	if err != nil {
		return fmt.Errorf("%w: the checkpoint of seq %d: %v", ErrLedgerDiverged, have, err)
	}
	payload, err := e.Open(c.signer.PublicKey())
	if err != nil {
		return fmt.Errorf("%w: the checkpoint of seq %d does not verify with the signing key: %v", ErrLedgerDiverged, have, err)
	}
	var cp receipt.Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil || cp.Seq != have {
		return fmt.Errorf("%w: the checkpoint stored at seq %d names seq %d", ErrLedgerDiverged, have, cp.Seq)
	}
	prev, last := cp.Head, have
	stop := errors.New("stop")
	err = c.store.ExportLedger(ctx, max(have, 1), func(e receipt.Entry, _ []byte) error {
		switch {
		case e.Seq > upTo:
			return stop
		case e.Seq == have:
			if e.Hash() != cp.Head {
				return fmt.Errorf("%w: entry seq %d no longer hashes to the head signed at seq %d", ErrLedgerDiverged, e.Seq, have)
			}
			return nil
		case e.Seq != last+1 || e.Prev != prev:
			return fmt.Errorf("%w: entry seq %d does not chain onto seq %d", ErrLedgerDiverged, e.Seq, last)
		}
		prev, last = e.Hash(), e.Seq
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return err
	}
	if last != upTo {
		return fmt.Errorf("%w: the ledger ends at seq %d, not %d", ErrLedgerDiverged, last, upTo)
	}
	return nil
}

// StartCheckpoints makes the ledger carry signed checkpoints: one in the
// transaction of every every-th entry (0: none by count), and, from a
// goroutine of its own until ctx ends, one of the current head every
// interval when entries were appended since the newest (0: none by time).
// The caller signs one more at shutdown (Checkpoint).
func (l *Ledger) StartCheckpoints(ctx context.Context, every uint64, interval time.Duration) {
	l.c.start(ctx, every, interval)
}

// start is StartCheckpoints.
func (c checkpointer) start(ctx context.Context, every uint64, interval time.Duration) {
	if c.signer == nil {
		return
	}
	if every > 0 {
		c.store.SignCheckpoints(&store.Checkpointing{Every: every, Sign: newReceiptSigner(c.signer).checkpoint})
	}
	if interval > 0 {
		go c.every(ctx, interval)
	}
}

// every signs a checkpoint every interval until ctx ends (none of an
// empty ledger), logging a failure.
func (c checkpointer) every(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if _, _, err := c.checkpoint(ctx, false); err != nil && ctx.Err() == nil {
			c.logger.Error("signing a ledger checkpoint", "error", err)
		}
	})
}

package store

import (
	"context"
	"fmt"

	"github.com/verifierd/verifierd/receipt"
)

// CheckpointSigner signs a checkpoint of the ledger whose entry seq hashes
// to head (receipt.Entry.Hash) and returns the DSSE envelope JSON.
type CheckpointSigner func(seq uint64, head string) ([]byte, error)

// Checkpointing makes every Every-th entry carry a signed checkpoint,
// written in the transaction that appends the entry: a ledger never runs
// more than Every entries past its newest checkpoint (the daemon signs
// further ones on a timer and at shutdown).
type Checkpointing struct {
	Every uint64
	Sign  CheckpointSigner
}

// After signs and stores, with put, the checkpoint that entry e calls for:
// none when c is nil or e's seq is not a multiple of c.Every. Every
// backend's Ledger.Append calls it right after storing e, inside the same
// transaction, with put storing the checkpoint there (one already stored
// at that seq stays).
func (c *Checkpointing) After(e receipt.Entry, put func(seq uint64, envelope []byte) error) error {
	if c == nil || c.Every == 0 || e.Seq%c.Every != 0 {
		return nil
	}
	env, err := c.Sign(e.Seq, e.Hash())
	if err != nil {
		return fmt.Errorf("signing the ledger checkpoint at seq %d: %w", e.Seq, err)
	}
	return put(e.Seq, env)
}

// ExportBatch bounds the entries a backend reads per transaction or query
// in ExportLedger, so that a slow reader never holds a read transaction
// for long.
const ExportBatch = 512

// LedgerEntry is one ledger entry as a backend stores it: decoded, and its
// canonical bytes.
type LedgerEntry struct {
	Entry     receipt.Entry
	Canonical []byte
}

// ExportInBatches is every backend's ExportLedger: read returns at most
// limit entries from seq from on, oldest first, and fn sees each one
// outside the read; a batch shorter than limit is the last. It stops with
// ctx's error once ctx ends.
func ExportInBatches(ctx context.Context, from uint64, fn func(receipt.Entry, []byte) error, read func(ctx context.Context, from uint64, limit int) ([]LedgerEntry, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := read(ctx, from, ExportBatch)
		if err != nil {
			return err
		}
		for _, r := range batch {
			if err := fn(r.Entry, r.Canonical); err != nil {
				return err
			}
		}
		if len(batch) < ExportBatch {
			return nil
		}
		from = batch[len(batch)-1].Entry.Seq + 1
	}
}

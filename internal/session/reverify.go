package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
)

// Reverify judges a fresh read through the session's pinned adapters
// against its original baseline, after someone repaired the system of
// record. The result is stored beside the first one (never replacing it)
// with its own receipt; the ledger records it, and closes the reconciliation
// tasks when it is VERIFIED. A session whose first result was VERIFIED, or
// that a re-verification already verified, is refused (FailedPrecondition):
// there is nothing to repair. The compensator never runs here.
func (m *Manager) Reverify(ctx context.Context, id, reason string) (*Result, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, &Error{Kind: Invalid, Path: "reason", Message: "say what was repaired, e.g. \"deleted the duplicate encounter by hand\""}
	}
	unlock, raw, stored, err := m.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if stored == nil {
		return nil, &Error{Kind: Refused, Path: "session_id", Message: "the session has not been verified yet; call Verify first"}
	}
	var first Result
	if err := decodeResult(stored, &first); err != nil {
		return nil, err
	}
	if first.Outcome == judge.Verified {
		return nil, &Error{Kind: Refused, Path: "session_id", Message: "the session was VERIFIED; there is nothing to re-verify"}
	}
	open := openTasks(&first)
	more, err := m.store.Reverifications(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, r := range more {
		var prev Result
		if err := decodeResult(r, &prev); err != nil {
			return nil, err
		}
		if prev.Outcome == judge.Verified {
			return nil, &Error{Kind: Refused, Path: "session_id", Message: fmt.Sprintf("re-verification %d already VERIFIED the session; there is nothing to re-verify", prev.Attempt)}
		}
		open = openTasks(&prev)
	}
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("session %s is corrupt: %w", id, err)
	}
	res, ev, err := m.judgeStep(ctx, id, &md, true)
	if err != nil {
		return nil, err
	}
	out, err := m.store.AddReverification(ctx, id, func(l store.Ledger, attempt int) ([]byte, bool, error) {
		out, err := m.seal(l, raw, &md, res, ev, &reverifyOf{attempt: attempt, reason: reason, openTasks: open})
		// Once VERIFIED the session is settled and its baseline goes
		// (a run's session keeps it for the rollback check).
		return out, res.Outcome != judge.Verified || md.Run != nil, err
	})
	if err != nil {
		return nil, err
	}
	var r Result
	if err := decodeResult(out, &r); err != nil {
		return nil, err
	}
	m.logger.Info("session re-verified", "session", id, "attempt", r.Attempt, "outcome", r.Outcome)
	// The re-verification closes (when VERIFIED) or supersedes the tasks
	// that were open, and issues its own: issued - closed stays the
	// number of open tasks.
	m.metrics.TasksClosed(len(open))
	m.metrics.TasksIssued(len(openTasks(&r)))
	return &r, nil
}

func openTasks(r *Result) []string {
	var ids []string
	for _, e := range r.Effects {
		if e.ReconciliationTask != nil {
			ids = append(ids, e.ReconciliationTask.ID)
		}
	}
	return ids
}

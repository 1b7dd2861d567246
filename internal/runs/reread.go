package runs

import (
	"context"

	"github.com/verifierd/verifierd/internal/run"
)

// rollbackRead judges a fresh read of one session's effects against its
// original baseline (as Reverify does, the compensator never runs) and
// stores nothing.
func (svc *Service) rollbackRead(ctx context.Context, step, sid string) ([]run.EffectCheck, error) {
	r, err := svc.h.Reread(ctx, step, sid)
	if err != nil {
		return nil, err
	}
	return r.Checks(), nil
}

// runCreated is the identities of the records the run's sessions counted
// as new (their change claims' matched records, in every result of each
// session: a duplicate the run wrote, seen by a result a Reverify
// replaced, is the run's too): a later step's baseline holds them, and
// their removal is the rollback or the repair, not a loss.
func (svc *Service) runCreated(ctx context.Context, rec *runRecord) (map[string]bool, error) {
	out := map[string]bool{}
	for _, rs := range rec.Steps {
		if err := svc.h.SessionsCreated(ctx, rs.Sessions, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

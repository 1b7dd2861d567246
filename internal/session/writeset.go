package session

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/changes"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// A candidate with changes: (config.ChangesSetting) reads the write set:
// Begin stores the change log's position beside the baseline, and every
// Verify poll reads, after its after read, every committed change to the
// declared tables from that position up to the log's position then, and
// gives it to the judge (withWriteSet). The daemon reads the log itself,
// with the candidate's connection; no plugin reports a write set. The
// deployment's slot is advanced, after a Verify, only to the oldest
// position an open session of any replica still holds (the holds are in
// the session store: writeset_holds.go).

// writeSetMeta is what Begin stores of a group's write set.
type writeSetMeta struct {
	Source string           `json:"source"`
	Slot   string           `json:"slot"`
	From   changes.Position `json:"from"`
}

// writeSetSources are the daemon's open change-log sources, one per
// deployment, candidate and connection. Their holds are in the session
// store (writeset_holds.go).
type writeSetSources struct {
	mu      sync.Mutex
	sources map[string]*changes.Postgres
}

// writeSetSource is candidate ci's source.
func (m *Manager) writeSetSource(depName string, dep *config.Deployment, ci int) (*changes.Postgres, error) {
	fresh, key, err := newWriteSetSource(m.configurer(), depName, dep, ci)
	if err != nil {
		return nil, err
	}
	w := m.writeSets
	w.mu.Lock()
	defer w.mu.Unlock()
	src := w.sources[key]
	if src == nil {
		src = fresh
		w.sources[key] = src
	}
	return src, nil
}

// newWriteSetSource is a source for candidate ci of the deployment named
// depName, connecting as the candidate does, and the key that tells it
// from the sources of other candidates and connections.
func newWriteSetSource(conf *configurer, depName string, dep *config.Deployment, ci int) (*changes.Postgres, string, error) {
	c := &dep.Candidates[ci]
	names, err := changes.NamesFor(depName)
	if depName == "" {
		err = fmt.Errorf("changes: needs a registered deployment: the replication slot is named after it; register the deployment under deployments: in the daemon config")
	}
	if err != nil {
		return nil, "", err
	}
	secrets, err := c.ResolveSecrets(conf.lookupEnv, conf.allow)
	if err != nil {
		return nil, "", err
	}
	connArgs, _ := c.Section["sql_connect_args"].(map[string]any)
	cc, err := sqladapter.PostgresConnConfig(connArgs, secrets["sql_password_env"])
	if err != nil {
		return nil, "", err
	}
	key := strings.Join([]string{names.Slot, fmt.Sprint(ci), strings.Join(c.Changes.Tables, ","), judge.CanonicalJSON(connArgs), c.Secrets["sql_password_env"]}, "\x00")
	src := &changes.Postgres{Names: names, Tables: slices.Clone(c.Changes.Tables), Connect: func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.ConnectConfig(ctx, cc)
	}}
	return src, key, nil
}

// testWriteSet is the preflight of candidate ci's write set: every problem
// of the log's configuration, with its fix, as one message ("" when none).
func (p preflight) testWriteSet(ctx context.Context, depName string, dep *config.Deployment, ci int) string {
	src, _, err := newWriteSetSource(p.configurer, depName, dep, ci)
	if err != nil {
		return "the write set (changes:) cannot be read: " + err.Error()
	}
	defer src.Close(context.WithoutCancel(ctx))
	if problems := src.Preflight(ctx); len(problems) > 0 {
		return "the write set (changes:) cannot be read: " + strings.Join(problems, "; ")
	}
	return ""
}

// usesWriteSet reports whether any contract of a group is judged on the
// write set: one that needs the baseline, or forbids other writes.
func usesWriteSet(group []*judge.Contract) bool {
	return slices.ContainsFunc(group, func(c *judge.Contract) bool { return judge.NeedsBaseline(c) || c.ForbidOtherWrites })
}

// holdKey names a group's hold.
func holdKey(id string, n int) string { return fmt.Sprintf("%s/%d", id, n) }

// beginWriteSet records the log's position for capture n at Begin and
// holds it. A log that cannot serve refuses the session, as an unreadable
// baseline does: the client must not actuate. The position is read after
// the baseline on purpose: a change committed while Begin runs is then in
// neither the write set nor (perhaps) the baseline, so it can never count
// as the step's own creation.
func (m *Manager) beginWriteSet(ctx context.Context, id string, n int, md *meta, dep *config.Deployment, ci int, group []*judge.Contract) (*writeSetMeta, error) {
	c := &dep.Candidates[ci]
	if c.Changes == nil || !usesWriteSet(group) {
		return nil, nil
	}
	refuse := func(why string) error {
		return &Error{Kind: Refused, Code: judge.ReasonChangesUnusable, Path: candidatePath(dep, ci) + ".changes",
			Message: fmt.Sprintf("the write set of %s cannot be read (%s); do not actuate", candidatePath(dep, ci), why)}
	}
	src, err := m.writeSetSource(md.DeploymentName, dep, ci)
	if err != nil {
		return nil, refuse(err.Error())
	}
	// Held, in the store, at the log's start until the position is read,
	// so that no Verify of any replica advances the slot past it in
	// between. A refusal drops the baseline, which releases the hold
	// (releaseWriteSets).
	if err := m.holdStore.hold(ctx, src.Names.Slot, holdKey(id, n), changes.Position("0/0")); err != nil {
		return nil, refuse("its hold on the slot could not be stored: " + err.Error())
	}
	if why, err := src.Ready(ctx); err != nil || why != "" {
		return nil, refuse(cmpText(why, err))
	}
	pos, err := src.Position(ctx)
	if err != nil {
		return nil, refuse(err.Error())
	}
	if err := m.holdStore.hold(ctx, src.Names.Slot, holdKey(id, n), pos); err != nil {
		return nil, refuse("its hold on the slot could not be stored: " + err.Error())
	}
	return &writeSetMeta{Source: c.Changes.Source, Slot: src.Names.Slot, From: pos}, nil
}

func cmpText(why string, err error) string {
	if why != "" {
		return why
	}
	return err.Error()
}

// readWriteSet reads the group's write set for one poll, after its after
// read: from Begin's position to the log's position now. Every failure is
// a write set that is not reachable (the judge: CHANGES_UNUSABLE), never
// none. nil for a group that reads no write set.
func (g *group) readWriteSet(ctx context.Context) *judge.WriteSet {
	wm := g.cm.Changes
	if wm == nil {
		if g.cand.Changes != nil && usesWriteSet(g.effects) {
			return &judge.WriteSet{Reason: "Begin stored no log position for this candidate (the deployment gained changes: after Begin)"}
		}
		return nil
	}
	span := &receipt.WriteSetSpan{Source: wm.Source, From: string(wm.From)}
	g.ev.WriteSet = span
	if g.cand.Changes == nil {
		return &judge.WriteSet{Reason: "the deployment no longer declares this candidate's changes:"}
	}
	src, err := g.m.writeSetSource(g.depName, g.dep, g.cm.Candidate)
	if err != nil {
		return &judge.WriteSet{Reason: err.Error()}
	}
	upTo, err := src.Position(ctx)
	if err != nil {
		return &judge.WriteSet{Reason: err.Error()}
	}
	ws, err := src.Read(ctx, wm.From, upTo)
	if err != nil {
		ws = judge.WriteSet{Reason: err.Error()}
	}
	span.To, span.Changes, span.Reachable, span.Complete = string(upTo), len(ws.Changes), ws.Reachable, ws.Complete
	g.m.metrics.WriteSetRead(src.Names.Slot, len(ws.Changes))
	return &ws
}

// endWriteSet releases the group's hold after its Verify and advances the
// slot to the oldest position still held by an open session of any
// replica, or to where this Verify read up to when none is: the log before
// it is released. A failure to release, to read the holds or to advance
// only keeps log; it is logged.
func (g *group) endWriteSet(ctx context.Context) {
	wm := g.cm.Changes
	if wm == nil || g.cand.Changes == nil {
		return
	}
	src, err := g.m.writeSetSource(g.depName, g.dep, g.cm.Candidate)
	if err != nil {
		return
	}
	warn := func(err error) {
		g.m.logger.Warn("the change-log slot could not be advanced; it keeps its log until the next Verify", "slot", src.Names.Slot, "error", err.Error())
	}
	if !g.inRun {
		// A run's step stays held: the run's finish reads it again.
		if err := g.m.holdStore.releaseHolds(ctx, holdKey(g.id, g.n)); err != nil {
			warn(err)
			return
		}
	}
	to, held, err := g.m.holdStore.advanceBound(ctx, src.Names.Slot)
	if err != nil {
		warn(err)
		return
	}
	if !held {
		if g.ev.WriteSet == nil || g.ev.WriteSet.To == "" {
			return
		}
		to = changes.Position(g.ev.WriteSet.To)
	}
	if err := src.Advance(ctx, to); err != nil {
		warn(err)
	}
	if st, err := src.Status(ctx); err == nil {
		g.m.metrics.WriteSetSlot(src.Names.Slot, st.LagBytes, st.RetainedBytes)
	}
}

// writeSetSpans maps each effect to its group's write-set span.
func writeSetSpans(md *meta, ev *stepEvidence) map[int]*receipt.WriteSetSpan {
	out := map[int]*receipt.WriteSetSpan{}
	for n, cm := range md.Captures {
		if n < len(ev.Groups) && ev.Groups[n].WriteSet != nil {
			for _, i := range cm.Effects {
				out[i] = ev.Groups[n].WriteSet
			}
		}
	}
	return maps.Clone(out)
}

// RunEffectClaims are, for a run receipt, how each effect of a step's
// latest result proved a record new and the write set it was judged on
// (nil without a result).
func RunEffectClaims(r *Result) []receipt.RunEffectClaim {
	if r == nil {
		return nil
	}
	out := make([]receipt.RunEffectClaim, 0, len(r.Effects))
	for i, e := range r.Effects {
		c := receipt.RunEffectClaim{Index: i, Newness: e.Newness}
		if ws := e.WriteSet; ws != nil {
			c.WriteSet = ws
		}
		out = append(out, c)
	}
	return out
}

func newWriteSetSources() *writeSetSources {
	return &writeSetSources{sources: map[string]*changes.Postgres{}}
}

// releaseWriteSets releases every hold of session id (a Begin that did
// not store the session, a run sealed VERIFIED). A failure keeps the
// holds, and so the log, until they are stale (staleHoldAfter) or
// released again; it is logged.
func (m *Manager) releaseWriteSets(ctx context.Context, id string) {
	if err := m.holdStore.releaseHolds(ctx, id+"/"); err != nil {
		m.logger.Warn("the write set's holds of a session could not be released; the slot keeps its log", "session", id, "error", err.Error())
	}
}

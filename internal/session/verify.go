package session

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// EffectResult is one effect's final verdict as clients see it: the
// verdict as it is shown (judge.EffectResult, what the conformance harness
// prints; its fields inline in the JSON, in the same order), then how it
// was read and the task.
type EffectResult struct {
	judge.EffectResult
	Tier int `json:"tier"`
	// OracleRung is the read's rung of the oracle ladder (internal/oracle):
	// what the receipt states beside the tier. 0 from Judge, and in
	// results stored before rungs.
	OracleRung         int         `json:"oracle_rung"`
	Substrate          string      `json:"substrate"`
	ReconciliationTask *judge.Task `json:"reconciliation_task"`
	// Newness is how the selected candidate proves a record new
	// (config.NewnessCensus, NewnessWholeRead, NewnessWholeReadDeclared,
	// NewnessNewlyMatching); CensusScope, with a census, whether the
	// daemon proved it whole or the operator declared it
	// (config.CensusScopeProven, CensusScopeDeclared); CollateralScope what
	// its loss checks see (config.ScopeCollection, ScopeSubject). Empty in
	// results stored before them.
	Newness         string `json:"newness,omitempty"`
	CensusScope     string `json:"census_scope,omitempty"`
	CollateralScope string `json:"collateral_scope,omitempty"`
	// WriteSet is the write set the effect was judged on: its positions
	// and count (nil for a candidate without changes:).
	WriteSet *receipt.WriteSetSpan `json:"write_set,omitempty"`
}

// Result is a verified session's result.
type Result struct {
	SessionID  string         `json:"session_id"`
	Outcome    judge.Outcome  `json:"outcome"`
	Effects    []EffectResult `json:"effects"`
	VerifiedAt time.Time      `json:"verified_at"`
	// Registered is the workflow step whose contracts were judged (nil when
	// the caller sent the effects).
	Registered *RegisteredStep `json:"registered_step,omitempty"`
	// TerminalOutcome is what the ledger and the receipt record: Outcome,
	// or FAILED_PLATFORM (see terminalOutcome). Empty in results stored
	// before receipts.
	TerminalOutcome string `json:"terminal_outcome,omitempty"`
	// Attempt and ReverifyReason are set on a re-verification (1, 2, …).
	Attempt        int    `json:"attempt,omitempty"`
	ReverifyReason string `json:"reverify_reason,omitempty"`
	// Receipt is the signed DSSE envelope of this result (JSON), when the
	// daemon has a signing key.
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

// State is what GetSession reports.
type State struct {
	SessionID string      `json:"session_id"`
	Begin     BeginResult `json:"begin"`
	BegunAt   time.Time   `json:"begun_at"`
	Result    *Result     `json:"result,omitempty"`
	// Reverifications are the results of Reverify, oldest first.
	Reverifications []*Result `json:"reverifications,omitempty"`
}

// Get returns a session's state.
func (m *Manager) Get(ctx context.Context, id string) (*State, error) {
	if err := CheckSessionID(id); err != nil {
		return nil, err
	}
	raw, result, err := m.store.Session(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &Error{Kind: NotFound, Path: "session_id", Message: fmt.Sprintf("no session %q", clip(id))}
		}
		return nil, err
	}
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("session %s is corrupt: %w", id, err)
	}
	st := &State{SessionID: id, Begin: md.Begin, BegunAt: md.BegunAt}
	if result != nil {
		var r Result
		if err := decodeResult(result, &r); err != nil {
			return nil, err
		}
		st.Result = &r
	}
	more, err := m.store.Reverifications(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, raw := range more {
		var r Result
		if err := decodeResult(raw, &r); err != nil {
			return nil, err
		}
		st.Reverifications = append(st.Reverifications, &r)
	}
	return st, nil
}

func decodeResult(raw []byte, r *Result) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(r)
}

// lockSession checks the id, takes the session's lock and reads it; the
// caller releases the lock with unlock (nil on error).
func (m *Manager) lockSession(ctx context.Context, id string) (unlock func(), meta, result []byte, err error) {
	if err := CheckSessionID(id); err != nil {
		return nil, nil, nil, err
	}
	unlock, err = m.locks.lock(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	meta, result, err = m.store.Session(ctx, id)
	if err != nil {
		unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil, &Error{Kind: NotFound, Path: "session_id", Message: fmt.Sprintf("no session %q", clip(id))}
		}
		return nil, nil, nil, err
	}
	return unlock, meta, result, nil
}

// Verify judges a begun session, or returns its recorded result.
func (m *Manager) Verify(ctx context.Context, id string) (*Result, error) {
	ctx, span := telemetry.Start(ctx, telemetry.SpanVerify, telemetry.KeySession.String(id))
	start := time.Now()
	var note verifyNote
	res, err := m.verify(ctx, id, &note)
	observer{m.metrics, m.logger}.verify(id, &note, res, err, time.Since(start))
	endVerify(span, &note, res, err)
	return res, err
}

func (m *Manager) verify(ctx context.Context, id string, note *verifyNote) (*Result, error) {
	_, span := telemetry.Start(ctx, telemetry.SpanStoreRead, telemetry.KeySession.String(id))
	unlock, raw, stored, err := m.lockSession(ctx, id)
	endErr(span, err)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var md meta
	metaErr := json.Unmarshal(raw, &md)
	note.deployment = md.DeploymentName
	if stored != nil {
		note.replay = true
		var r Result
		return &r, decodeResult(stored, &r)
	}
	if metaErr != nil {
		return nil, fmt.Errorf("session %s is corrupt: %w", id, metaErr)
	}
	note.judging = true
	res, ev, err := m.judgeStep(ctx, id, &md, false)
	if err != nil {
		return nil, err
	}
	_, span = telemetry.Start(ctx, telemetry.SpanStoreFinish, telemetry.KeySession.String(id))
	final, own, err := m.store.FinishSessionLedger(ctx, id, func(l store.Ledger) ([]byte, bool, error) {
		out, err := m.seal(l, raw, &md, res, ev, nil)
		// A VERIFIED session cannot be re-verified, so its baseline goes,
		// unless its run's rollback check may still read against it.
		return out, res.Outcome != judge.Verified || md.Run != nil, err
	})
	endErr(span, err)
	if err != nil {
		return nil, err
	}
	if own {
		// What was stored is this call's own result, sealed from res (the
		// last time the transaction ran): answer it without decoding the
		// JSON just encoded.
		note.judged = true
		return res, nil
	}
	var r Result
	if err := decodeResult(final, &r); err != nil {
		return nil, err
	}
	// When another replica finished first, its result stands and was
	// counted there.
	note.judged = r.VerifiedAt.Equal(res.VerifiedAt)
	note.replay = !note.judged
	return &r, nil
}

// judgeStep reads through the session's pinned adapters, judges every
// effect against the stored baseline and builds the result (not stored).
// noCompensate leaves the compensator out (a re-verification after a
// person's repair never deletes anything).
func (m *Manager) judgeStep(ctx context.Context, id string, md *meta, noCompensate bool) (*Result, *stepEvidence, error) {
	dep, contracts, err := parse(md.Deployment, md.Effects, md.Params)
	if err != nil {
		return nil, nil, fmt.Errorf("session %s no longer parses: %w", id, err)
	}
	// The parameters were checked at Begin; every capture binds them again.
	insts, instErrs := m.configure(ctx, dep, contracts, md.Params, forSession)

	verdicts := make([]judge.Verdict, len(contracts))
	tasks := make([]*judge.Task, len(contracts)) // set only by a compensation
	ev := &stepEvidence{Groups: make([]groupEvidence, len(md.Captures))}
	for n := range ev.Groups {
		ev.Groups[n].noCompensate = noCompensate
		ev.Groups[n].settleFloor = seconds(md.SettleFloorS)
	}
	var wg sync.WaitGroup
	for n, cm := range md.Captures {
		wg.Go(func() {
			vs, ts := m.verifyGroup(ctx, groupRun{id: id, n: n, cm: cm, inst: insts[cm.Candidate], instErr: instErrs[cm.Candidate], contracts: contracts, dep: dep, depName: md.DeploymentName, inRun: md.Run != nil, ev: &ev.Groups[n]})
			for k, i := range cm.Effects {
				verdicts[i], tasks[i] = vs[k], ts[k]
			}
		})
	}
	wg.Wait()
	for n := range ev.Groups {
		// A damaged stored baseline or census is not judged against.
		if err := cmp.Or(ev.Groups[n].baselineLoss, ev.Groups[n].censusLoss); err != nil {
			return nil, nil, err
		}
	}

	res := &Result{SessionID: id, Effects: make([]EffectResult, len(contracts)), VerifiedAt: time.Now().UTC(), Registered: md.Begin.Registered}
	res.Outcome = judge.OutcomeOf(verdicts)
	ev.Matched = make([][]judge.Record, len(contracts))
	ev.Verdicts = verdicts
	for i, c := range contracts {
		if tasks[i] == nil {
			cand := dep.Candidates[md.Begin.Effects[i].CandidateIndex]
			tasks[i] = judge.NewTask(id, i, cand.Kind, c, &verdicts[i], judge.TaskOptions{IrreversibleStep: md.IrreversibleStep, Digest: m.evidence().digester()})
		}
	}
	judge.SuggestForOutcome(res.Outcome, tasks)
	spans := writeSetSpans(md, ev)
	for i, c := range contracts {
		sel := md.Begin.Effects[i]
		cand := dep.Candidates[sel.CandidateIndex]
		v := verdicts[i]
		secrets := m.secretMask(&cand)
		// Digested only (keyed), as read: a digest holds no value.
		ev.Matched[i] = v.Matched
		task := tasks[i]
		// The redaction and the secret mask change values only: decision,
		// class, counts and codes are v's.
		shown := judge.ResultOf(secrets.verdict(cand.Redaction.Apply(v, c)))
		shown.ContractHash = c.Hash
		newness, scope, censusScope := newnessOf(&cand)
		res.Effects[i] = EffectResult{EffectResult: shown, Tier: sel.Tier, OracleRung: int(oracle.Of(cand.Kind, sdk.Tier(sel.Tier))),
			Substrate: cand.Kind, ReconciliationTask: task, Newness: newness, CensusScope: censusScope, CollateralScope: scope, WriteSet: spans[i]}
	}
	res.TerminalOutcome = terminalOutcome(res.Outcome, verdicts, md.Captures, ev)
	return res, ev, nil
}

// decodeRecord decodes one adapter record, keeping numbers exact.
func decodeRecord(raw []byte) (judge.Record, error) {
	r, err := host.DecodeRecord(raw)
	if err != nil {
		return nil, err
	}
	return judge.Record(r), nil
}

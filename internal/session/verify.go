package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/verifierd/verifierd/internal/compensate"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
)

// EffectResult is one effect's final verdict as clients see it.
type EffectResult struct {
	Verdict            judge.Decision `json:"verdict"`
	Result             judge.Class    `json:"result"`
	Reasons            []judge.Reason `json:"reasons"`
	ObservedCount      *int           `json:"observed_count"`
	ExpectedCount      *int           `json:"expected_count"`
	ObservedValue      *string        `json:"observed_value"`
	ExpectedValue      *string        `json:"expected_value"`
	ContractHash       string         `json:"contract_hash"`
	MatchedRecords     []judge.Record `json:"matched_records"`
	Tier               int            `json:"tier"`
	Substrate          string         `json:"substrate"`
	ReconciliationTask *judge.Task    `json:"reconciliation_task"`
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
}

// State is what GetSession reports.
type State struct {
	SessionID string      `json:"session_id"`
	Begin     BeginResult `json:"begin"`
	BegunAt   time.Time   `json:"begun_at"`
	Result    *Result     `json:"result,omitempty"`
}

// Get returns a session's state.
func (m *Manager) Get(id string) (*State, error) {
	if err := CheckSessionID(id); err != nil {
		return nil, err
	}
	raw, result, err := m.Store.Session(id)
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
	return st, nil
}

func decodeResult(raw []byte, r *Result) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(r)
}

// Verify judges a begun session, or returns its recorded result.
func (m *Manager) Verify(ctx context.Context, id string) (*Result, error) {
	if err := CheckSessionID(id); err != nil {
		return nil, err
	}
	unlock := m.locks.lock(id)
	defer unlock()
	raw, stored, err := m.Store.Session(id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &Error{Kind: NotFound, Path: "session_id", Message: fmt.Sprintf("no session %q", clip(id))}
		}
		return nil, err
	}
	if stored != nil {
		var r Result
		return &r, decodeResult(stored, &r)
	}
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("session %s is corrupt: %w", id, err)
	}
	dep, contracts, err := parse(md.Deployment, md.Effects, md.Params)
	if err != nil {
		return nil, fmt.Errorf("session %s no longer parses: %w", id, err)
	}
	insts, instErrs := m.configure(ctx, dep, contracts, md.Params)

	verdicts := make([]judge.Verdict, len(contracts))
	tasks := make([]*judge.Task, len(contracts)) // set only by a compensation
	var wg sync.WaitGroup
	for n, cm := range md.Captures {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, instErr := insts[cm.Candidate], instErrs[cm.Candidate]
			vs, ts := m.verifyGroup(ctx, id, n, cm, inst, instErr, contracts, &dep.Candidates[cm.Candidate])
			for k, i := range cm.Effects {
				verdicts[i], tasks[i] = vs[k], ts[k]
			}
		}()
	}
	wg.Wait()

	res := &Result{SessionID: id, Effects: make([]EffectResult, len(contracts)), VerifiedAt: time.Now().UTC(), Registered: md.Begin.Registered}
	for i, c := range contracts {
		sel := md.Begin.Effects[i]
		cand := dep.Candidates[sel.CandidateIndex]
		v := verdicts[i]
		task := tasks[i]
		if task == nil {
			task = judge.NewTaskWithDigest(id, i, cand.Kind, c, &v, m.digester())
		}
		shown := cand.Redaction.Apply(v, c)
		matched := shown.Matched
		if matched == nil {
			matched = []judge.Record{}
		}
		reasons := shown.Reasons
		if reasons == nil {
			reasons = []judge.Reason{}
		}
		res.Effects[i] = EffectResult{
			Verdict: v.Decision, Result: v.Class, Reasons: reasons,
			ObservedCount: v.ObservedCount, ExpectedCount: v.ExpectedCount,
			ObservedValue: shown.ObservedValue, ExpectedValue: shown.ExpectedValue,
			ContractHash: c.Hash, MatchedRecords: matched,
			Tier: sel.Tier, Substrate: cand.Kind, ReconciliationTask: task,
		}
	}
	res.Outcome = judge.OutcomeOf(verdicts)
	out, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	final, err := m.Store.FinishSession(id, out)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(final, out) {
		// Another replica finished first; its result stands.
		var r Result
		return &r, decodeResult(final, &r)
	}
	m.logger().Info("session verified", "session", id, "outcome", res.Outcome)
	return res, nil
}

// verifyGroup settles and judges every effect read through one adapter.
// Effects sharing an adapter share each after read and settle together,
// within the group's longest timeout_s.
func (m *Manager) verifyGroup(ctx context.Context, id string, n int, cm captureMeta, inst *pluginhost.Instance, instErr error, contracts []*judge.Contract, cand *config.Candidate) ([]judge.Verdict, []*judge.Task) {
	fresh, settleS := cand.Freshness, cand.SettleS
	group := make([]*judge.Contract, len(cm.Effects))
	for k, i := range cm.Effects {
		group[k] = contracts[i]
	}
	out := make([]judge.Verdict, len(group))
	tasks := make([]*judge.Task, len(group))
	unreachable := func(reason string) ([]judge.Verdict, []*judge.Task) {
		for k, c := range group {
			out[k] = judge.Judge(c, judge.Snapshot{}, judge.Snapshot{Reachable: false, Reason: reason}, judge.Options{})
		}
		return out, tasks
	}
	if instErr != nil {
		return unreachable(cand.Redaction.RedactText(instErr.Error(), group))
	}
	info := inst.Info()

	before := judge.Snapshot{Reachable: cm.Reachable, Reason: cm.Reason}
	if cm.Reachable {
		recs := make([]judge.Record, 0, cm.Records)
		err := m.Store.ReadBaseline(id, n, func(raw []byte) error {
			r, err := decodeRecord(raw)
			if err != nil {
				return err
			}
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			before = judge.Snapshot{Reachable: false, Reason: "the stored baseline could not be read: " + err.Error()}
		} else {
			before.Records = recs
		}
	}
	baseline := m.newKeyedBaseline(cm, before, cand.Redaction, group)
	var lastAfter judge.Snapshot

	timeout := effectTimeout(group)
	opts := judge.Options{AbsenceNotProof: info.AbsenceNotProof}
	var lastCapture string
	check := func(ctx context.Context) judge.Verdict {
		req := captureRequest(id, "after", n, contracts, cm.Effects)
		lastCapture = req.CaptureID
		readCtx, cancel := context.WithTimeout(ctx, max(timeout, time.Second)+seconds(settleS))
		after := m.readAfter(readCtx, inst, req)
		cancel()
		after.Reason = baseline.redactText(after.Reason, after)
		lastAfter = after
		before := baseline.against(after)
		if fresh != nil {
			opts.Freshness = &judge.Freshness{Field: fresh.Field, WindowS: fresh.WindowS, Now: m.clock().Now().UTC()}
		}
		all := judge.Verdict{Decision: judge.Confirmed}
		for k, c := range group {
			out[k] = judge.Judge(c, before, after, opts)
			if out[k].Decision != judge.Confirmed {
				all = out[k]
			}
		}
		return all
	}
	final := judge.Poll(ctx, m.clock(), judge.PollOptions{Timeout: timeout, Settle: seconds(settleS), Interval: m.PollInterval}, check)
	if len(final.Reasons) == 1 && final.Reasons[0].Code == judge.ReasonSettleInterrupted {
		for k := range out {
			out[k] = final
			out[k].ContractHash = group[k].Hash
		}
	}
	for k, c := range group {
		m.applyHook(ctx, inst, info, lastCapture, cm.Effects[k], c, &out[k], func(text string) string { return baseline.redactText(text, lastAfter) })
	}
	for k, c := range group {
		recheck := func(ctx context.Context) judge.Verdict {
			req := captureRequest(id, "after", n, contracts, cm.Effects)
			readCtx, cancel := context.WithTimeout(ctx, max(timeout, time.Second))
			defer cancel()
			if fresh != nil {
				opts.Freshness = &judge.Freshness{Field: fresh.Field, WindowS: fresh.WindowS, Now: m.clock().Now().UTC()}
			}
			after := m.readAfter(readCtx, inst, req)
			after.Reason = baseline.redactText(after.Reason, after)
			return judge.Judge(c, baseline.against(after), after, opts)
		}
		tasks[k] = m.compensate(ctx, id, cm.Effects[k], cand, c, &out[k], recheck)
		markScreenConsistency(&out[k], info.Tier)
	}
	return out, tasks
}

// ReasonCompensated marks a verdict given after the compensator deleted
// duplicates: the re-verification against the original baseline.
const ReasonCompensated = "COMPENSATED"

// compensate runs the one automatic repair when the deployment configures
// it: an irreversible record_written refuted only for duplicates gets its
// extra records deleted (keeping expected_count, lowest identities first),
// then a fresh read is judged against the original baseline and replaces
// the verdict. Any failure leaves the verdict REFUTED and returns a
// compensation_failed task naming (by digest) what was deleted so far.
func (m *Manager) compensate(ctx context.Context, id string, index int, cand *config.Candidate, c *judge.Contract, v *judge.Verdict, recheck func(context.Context) judge.Verdict) *judge.Task {
	if cand.Compensator == nil || c.Kind != judge.RecordWritten || c.Risk != judge.Irreversible || v.Decision != judge.Refuted {
		return nil
	}
	plan, err := judge.PlanCompensation(c, v)
	if err != nil {
		return nil // not a duplicate: the ordinary reconciliation task stands
	}
	allow := func(string) bool { return false }
	if m.Daemon != nil {
		allow = m.Daemon.AllowSecret
	}
	failed := func(deleted []judge.Record, why error) *judge.Task {
		// A failed DELETE's error may quote the URL, and so an identity.
		msg := cand.Redaction.RedactText(why.Error(), []*judge.Contract{c}, v.Matched)
		m.logger().Error("compensation failed", "session", id, "effect", index, "deleted", len(deleted), "error", msg)
		return judge.CompensationFailedTaskWithDigest(id, index, cand.Kind, c, v, deleted, m.digester())
	}
	secrets, err := cand.ResolveCompensator(m.lookupEnv, allow)
	if err != nil {
		return failed(nil, err)
	}
	comp, err := compensate.Parse(cand.Compensator, secrets)
	if err != nil {
		return failed(nil, err)
	}
	deleted, err := comp.Delete(ctx, plan.Delete)
	if err != nil {
		return failed(deleted, err)
	}
	nv := recheck(ctx)
	nv.Reasons = append(nv.Reasons, judge.Reason{Code: ReasonCompensated,
		Message: fmt.Sprintf("the compensator deleted %d duplicate(s); this verdict re-verifies against the original baseline", len(deleted))})
	*v = nv
	m.logger().Info("compensated duplicates", "session", id, "effect", index, "deleted", len(deleted), "verdict", nv.Decision)
	if nv.Decision != judge.Confirmed {
		return judge.CompensationFailedTaskWithDigest(id, index, cand.Kind, c, v, deleted, m.digester())
	}
	return nil
}

// readAfter reads the pinned adapter once. Every failure, transport or
// protocol, is an unreachable read: never a partial read set.
func (m *Manager) readAfter(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest) judge.Snapshot {
	capt, err := inst.CaptureAfter(ctx, req)
	if err != nil {
		return judge.Snapshot{Reachable: false, Reason: err.Error()}
	}
	defer capt.Close()
	if !capt.Reachable {
		reason := capt.Reason
		if reason == "" {
			reason = "unreachable"
		}
		return judge.Snapshot{Reachable: false, Reason: reason}
	}
	var recs []judge.Record
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return judge.Snapshot{Reachable: false, Reason: err.Error()}
		}
		for _, raw := range batch {
			r, err := decodeRecord(raw)
			if err != nil {
				return judge.Snapshot{Reachable: false, Reason: err.Error()}
			}
			recs = append(recs, r)
		}
	}
	return judge.Snapshot{Reachable: true, Records: recs}
}

// applyHook lets the adapter demote the verdict. A hook that fails (other
// than not existing) leaves doubt: a CONFIRMED becomes INDETERMINATE.
func (m *Manager) applyHook(ctx context.Context, inst *pluginhost.Instance, info sdk.Info, captureID string, index int, c *judge.Contract, v *judge.Verdict, redact func(string) string) {
	req := sdk.VerdictRequest{
		CaptureID: captureID, EffectIndex: index, ContractHash: c.Hash,
		Verdict: sdk.Verdict(v.Decision), Tier: info.Tier,
	}
	for _, r := range v.Reasons {
		req.Reasons = append(req.Reasons, sdk.Reason{Code: r.Code, Message: r.Message})
	}
	if v.ObservedCount != nil {
		n := int64(*v.ObservedCount)
		req.ObservedCount = &n
	}
	if v.ExpectedCount != nil {
		n := int64(*v.ExpectedCount)
		req.ExpectedCount = &n
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := inst.Verdict(hctx, req)
	switch {
	case errors.Is(err, plugin.ErrNoVerdictHook):
		return
	case err != nil:
		judge.Demote(v, judge.Indeterminate, "ADAPTER_HOOK_FAILED",
			"the adapter's verdict hook failed, so its view of this verdict is unknown: "+redact(err.Error()), info.AbsenceNotProof)
		return
	case d.IsZero():
		return
	}
	if !judge.Demote(v, judge.Decision(d.Verdict), d.ReasonCode, redact(d.Message), info.AbsenceNotProof) {
		m.logger().Warn("ignored a verdict hook answer that is not a demotion", "kind", inst.Kind(), "from", v.Decision, "to", d.Verdict)
	}
}

// decodeRecord decodes one adapter record, keeping numbers exact.
func decodeRecord(raw []byte) (judge.Record, error) {
	r, err := plugin.DecodeRecord(raw)
	if err != nil {
		return nil, err
	}
	return judge.Record(r), nil
}

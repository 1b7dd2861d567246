package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/compensate"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// group is the effects of one session that were captured through one
// pinned adapter: they share every after read and settle together, within
// the group's longest timeout_s. Verify runs its steps in order: read the
// stored baseline (while the first after read streams), settle (read and
// judge until settled), let the adapter's hook demote, compensate.
type group struct {
	m         *Manager
	id        string
	n         int // index of the capture in the session
	cm        captureMeta
	contracts []*judge.Contract // the session's, for capture requests
	effects   []*judge.Contract // this group's, in cm.Effects order
	cand      *config.Candidate
	inst      *pluginhost.Instance
	info      sdk.Info
	ev        *groupEvidence
	// dep and depName are the session's deployment and its registered
	// name: the write set's slot is named after it (writeset.go).
	dep     *config.Deployment
	depName string
	inRun   bool

	baseline keyedBaseline
	// baselineRead is closed once readBaseline set baseline: the stored
	// baseline streams from the store while the first after read streams
	// from the adapter.
	baselineRead  chan struct{}
	baselinePanic any // a panic of readBaseline, raised again by waitBaseline
	opts          judge.Options
	timeout       time.Duration
	settle        time.Duration
	// What the last after read was, for hook messages and the hook's
	// capture id.
	lastAfter   *read
	lastCapture string
	// census is the group's census (census.go); nil when none was stored.
	census *groupCensus
}

// groupRun is what verifyGroup judges: one capture of a session, with its
// pinned adapter.
type groupRun struct {
	id        string      // the session
	n         int         // the capture's index in the session
	cm        captureMeta // the capture
	inst      *pluginhost.Instance
	instErr   error // why inst could not be configured (inst is nil then)
	contracts []*judge.Contract
	dep       *config.Deployment
	depName   string         // the registered deployment's name ("" inline)
	ev        *groupEvidence // filled with what the group read
	// inRun: the session is a step of a run, whose finish reads it again;
	// its write set stays held after Verify (writeset.go).
	inRun bool
}

// verifyGroup settles and judges every effect of one capture and returns
// their verdicts, and the tasks a compensation left (nil otherwise).
func (m *Manager) verifyGroup(ctx context.Context, r groupRun) ([]judge.Verdict, []*judge.Task) {
	id, n, cm, inst, instErr, contracts, dep, ev := r.id, r.n, r.cm, r.inst, r.instErr, r.contracts, r.dep, r.ev
	cand := &dep.Candidates[cm.Candidate]
	g := &group{m: m, id: id, n: n, cm: cm, contracts: contracts, cand: cand, inst: inst, ev: ev, dep: dep, depName: r.depName, inRun: r.inRun}
	g.effects = make([]*judge.Contract, len(cm.Effects))
	for k, i := range cm.Effects {
		g.effects[k] = contracts[i]
	}
	if instErr != nil {
		// An adapter that would not start is the platform's failure; one
		// that refused its configuration (a root that is gone) reports on
		// the system of record.
		ev.PlatformFailed = !isKind(instErr, Invalid)
		return g.unreachable(m.secretMask(cand).text(cand.Redaction.RedactText(instErr.Error(), g.effects))), make([]*judge.Task, len(g.effects))
	}
	g.info = inst.Info()
	ctx, span := telemetry.Start(ctx, telemetry.SpanGroup, append(effectAttrs(contracts, cm.Effects),
		telemetry.KeySession.String(id), telemetry.KeyGroup.Int(n),
		telemetry.KeyKind.String(inst.Kind()), telemetry.KeyTier.Int(int(g.info.Tier)))...)
	defer span.End()
	// What a hook's demotion classes by until the first read is judged.
	g.opts = proofOptions(nil, g.info.AbsenceNotProof, nil, time.Time{})
	g.timeout, g.settle = effectTimeout(g.effects), seconds(cand.SettleS)
	if ev.settleFloor > g.settle && holdsChangeClaim(g.effects) {
		// The policy's min_settle_s for an irreversible step: a late
		// duplicate inside the floor is caught whatever the candidate's
		// own settle_s.
		g.settle = ev.settleFloor
	}
	g.startCensus(ctx, dep)
	g.startBaseline(ctx)
	defer g.waitBaseline()
	verdicts := g.settleAll(ctx)
	g.endWriteSet(ctx)
	g.waitBaseline()
	for k := range verdicts {
		g.hook(ctx, k, &verdicts[k])
	}
	tasks := make([]*judge.Task, len(verdicts))
	for k := range verdicts {
		if !ev.noCompensate {
			tasks[k] = g.compensate(ctx, k, &verdicts[k])
		}
		markScreenConsistency(&verdicts[k], g.info.Tier)
	}
	telemetry.Set(span, verdictAttr(verdicts))
	return verdicts, tasks
}

// holdsChangeClaim reports whether any effect is a change claim
// (record_written with count_new_only, or exact_new_set): the effects a
// settle floor watches for a late write.
func holdsChangeClaim(effects []*judge.Contract) bool {
	for _, c := range effects {
		if c.Kind == judge.ExactNewSet || (c.Kind == judge.RecordWritten && c.CountNewOnly) {
			return true
		}
	}
	return false
}

// unreachable states every effect's verdict when no after read could be
// made (judge.Unreachable): nothing was read, so nothing is judged.
func (g *group) unreachable(reason string) []judge.Verdict {
	out := make([]judge.Verdict, len(g.effects))
	for k, c := range g.effects {
		out[k] = judge.Unreachable(c, reason)
	}
	return out
}

// startBaseline reads the stored baseline on its own goroutine; every use
// of g.baseline waits for it (waitBaseline).
func (g *group) startBaseline(ctx context.Context) {
	done := make(chan struct{})
	g.baselineRead = done
	go func() {
		defer close(done)
		// A panic goes where it went before: to the Verify call's
		// goroutine (the server recovers it there), not the daemon's.
		defer func() { g.baselinePanic = recover() }()
		g.readBaseline(ctx)
	}()
}

// waitBaseline waits until the stored baseline is read.
func (g *group) waitBaseline() {
	if g.baselineRead == nil {
		return
	}
	<-g.baselineRead
	if p := g.baselinePanic; p != nil {
		g.baselinePanic = nil
		panic(p)
	}
}

// readBaseline loads the stored baseline of this capture, decoding it as
// it streams from the store into compact form: an index (captureMeta.Index)
// as it was stored, with the digest Begin took; a baseline stored whole
// projected and digested as it streams.
func (g *group) readBaseline(ctx context.Context) {
	_, span := telemetry.Start(ctx, telemetry.SpanStoreBaseline, telemetry.KeyGroup.Int(g.n))
	defer span.End()
	before := &read{snap: judge.BatchSnapshot{Reachable: g.cm.Reachable, Reason: g.cm.Reason}}
	// The store holds a placeholder for each secret value a record
	// carried; the judge is given the value (secretMask).
	secrets := g.m.secretMask(g.cand)
	if g.cm.Reachable {
		var err error
		if g.cm.Index == 0 {
			var p *judge.Projection
			if g.projection() {
				p = judge.ProjectBaseline(g.effects)
			}
			rs := g.m.evidence().newReadStream("the stored baseline's records", g.cm.Records, p)
			if err = g.m.store.ReadBaseline(ctx, g.id, g.n, func(rec []byte) error { return rs.Add(secrets.restoreRaw(rec)) }); err == nil {
				before = rs.read()
			}
		} else {
			before, err = g.readIndex(ctx, secrets)
		}
		if err != nil {
			if _, ok := errors.AsType[*store.IntegrityError](err); ok {
				g.ev.baselineLoss = err
			}
			telemetry.Fail(span, "baseline_unreadable")
			before = unreachableRead("the stored baseline could not be read: " + err.Error())
		} else {
			telemetry.Set(span, telemetry.KeyRecords.Int(before.len()))
		}
	}
	g.baseline = g.m.evidence().newKeyedBaseline(g.cm, before, g.cand.Redaction, g.effects)
	g.baseline.secrets = secrets
	g.ev.Baseline = g.m.evidence().readDigestOf(before)
}

// readIndex reads a baseline stored as an index (judge.RecordStream.Index) under the
// projection it was made with, neither projecting nor digesting it again.
// Anything unexpected (a form this daemon does not know, a digest under
// another evidence key or none, an entry without its mark, a count that
// differs) makes it unreadable: the contracts that need it are
// INDETERMINATE.
func (g *group) readIndex(ctx context.Context, secrets secretMask) (*read, error) {
	cm := g.cm
	switch {
	case cm.Index != baselineIndexV1:
		return nil, fmt.Errorf("it is stored in form %d, which this daemon does not know; verify it with the daemon version that began it", cm.Index)
	case !g.projection():
		return nil, errors.New("it is stored as an index, which a deployment with a redaction policy never stores")
	case cm.DigestKeyID != judge.KeyID(g.m.EvidenceDigestKey()):
		return nil, errors.New("its digest was taken with another evidence key; restore keys/evidence-hmac.key of this data dir")
	}
	rs := judge.NewRecordStream("the stored baseline's records", cm.Records)
	rs.Project(judge.ProjectBaseline(g.effects))
	if err := g.m.store.ReadBaseline(ctx, g.id, g.n, func(e []byte) error { return rs.AddEntry(secrets.restoreRaw(e)) }); err != nil {
		return nil, err
	}
	switch {
	case cm.Digest == "":
		return nil, errors.New("its index has no digest")
	case rs.Len() != cm.Records:
		return nil, fmt.Errorf("its index holds %d records, Begin stored %d", rs.Len(), cm.Records)
	}
	d := receipt.ReadDigest{Reachable: true, Records: rs.Len(), Digest: cm.Digest}
	return &read{snap: judge.BatchSnapshot{Reachable: true, Batch: rs.Batch()}, digest: &d}, nil
}

// projection reports whether this group's reads may be kept in part
// (judge.Projection: of each record what the group's contracts read). Not
// under a redaction policy: masking adapter text and restoring a keyed
// baseline read whole records of both reads.
func (g *group) projection() bool {
	return g.cm.KeyID == "" && !g.cand.Redaction.Active()
}

// read makes one after read through the pinned adapter, within the group's
// timeout plus extra, and records its digest; adapter text in it is
// redacted.
func (g *group) read(ctx context.Context, extra time.Duration) *read {
	req := captureRequest(g.id, "after", g.n, g.contracts, g.cm.Effects)
	req.ReadFields, req.ExpectedValues = contractReads(g.contracts, g.cm.Effects, freshnessField(g.cand.Freshness))
	g.lastCapture = req.CaptureID
	outer := ctx // the census is read in a span of its own, beside this one
	ctx, span := telemetry.Start(ctx, telemetry.SpanCaptureAfter, telemetry.KeyGroup.Int(g.n), telemetry.KeyKind.String(g.inst.Kind()))
	defer span.End()
	readCtx, cancel := context.WithTimeout(ctx, readTimeout(g.timeout)+extra+readGrace)
	defer cancel()
	// The after read is about the size of the baseline: room for it is
	// reserved once. The baseline's size is the stored count (the
	// baseline itself may still be streaming).
	var p *judge.Projection
	if g.projection() {
		p = judge.ProjectAfter(g.effects)
	}
	expect := 0
	if g.cm.Reachable {
		expect = g.cm.Records
	}
	after, err := g.m.readAfterRead(readCtx, g.inst, req, expect, p)
	g.readCensus(outer)
	g.waitBaseline()
	platform := err != nil && errors.Is(err, host.ErrPluginShutdown)
	telemetry.Set(span, telemetry.KeyRecords.Int(after.len()), telemetry.KeyReachable.Bool(after.reachable()))
	if !after.reachable() {
		telemetry.Fail(span, "unreachable")
	}
	after.snap.Reason = g.baseline.redactText(after.snap.Reason, after)
	g.lastAfter = after
	g.ev.After, g.ev.PlatformFailed = g.m.evidence().readDigestOf(after), platform
	return after
}

// judgeRead judges every effect of the group on one after read against the
// baseline, through the one judging path (prove) under the deployment's
// options (proofOptions: census, freshness, absence).
func (g *group) judgeRead(ctx context.Context, after *read) []judge.Verdict {
	_, span := telemetry.Start(ctx, telemetry.SpanJudge, effectAttrs(g.contracts, g.cm.Effects)...)
	defer span.End()
	g.waitBaseline()
	g.opts = withWriteSet(proofOptions(g.cand, g.info.AbsenceNotProof, g.censusOption(after), g.m.clock.Now().UTC()), g.readWriteSet(ctx))
	reads := proofReads{beforeBatch: &g.baseline.base.snap, afterBatch: &after.snap}
	if g.baseline.keyed {
		// Restoring hidden values works on maps: this read is judged in
		// map form.
		reads = proofReads{before: g.baseline.against(after), after: after.snapshot()}
	}
	out := prove(g.cand, g.effects, reads, g.opts).Verdicts
	telemetry.Set(span, verdictAttr(out))
	return out
}

// settleAll reads and judges until the group settles (docs/contracts.md §6).
func (g *group) settleAll(ctx context.Context) []judge.Verdict {
	return settleProof(ctx, g.m.clock, judge.PollOptions{Timeout: g.timeout, Settle: g.settle, Interval: g.m.pollInterval},
		func(ctx context.Context) []judge.Verdict { return g.judgeRead(ctx, g.read(ctx, g.settle)) })
}

// hook lets the adapter demote effect k's verdict. A hook that fails (other
// than not existing) leaves doubt: a CONFIRMED becomes INDETERMINATE.
func (g *group) hook(ctx context.Context, k int, v *judge.Verdict) {
	c := g.effects[k]
	req := sdk.VerdictRequest{
		CaptureID: g.lastCapture, EffectIndex: g.cm.Effects[k], ContractHash: c.Hash,
		Verdict: sdk.Verdict(v.Decision), Tier: g.info.Tier,
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
	redact := func(text string) string { return g.baseline.redactText(text, g.lastAfter) }
	ctx, span := telemetry.Start(ctx, telemetry.SpanHook, telemetry.KeyEffectIndex.Int(g.cm.Effects[k]),
		telemetry.KeyEffectKind.String(string(c.Kind)), telemetry.KeyKind.String(g.inst.Kind()), telemetry.KeyVerdict.String(string(v.Decision)))
	defer func() {
		telemetry.Set(span, telemetry.KeyDemoted.Bool(string(v.Decision) != string(req.Verdict)))
		span.End()
	}()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := g.inst.Verdict(hctx, req)
	if !errors.Is(err, host.ErrNoVerdictHook) {
		telemetry.Set(span, telemetry.KeyHookPresent.Bool(true))
	}
	switch {
	case errors.Is(err, host.ErrNoVerdictHook):
		telemetry.Set(span, telemetry.KeyHookPresent.Bool(false))
		return
	case err != nil:
		telemetry.Fail(span, "hook_failed")
		judge.Demote(v, judge.Indeterminate, "ADAPTER_HOOK_FAILED",
			"the adapter's verdict hook failed, so its view of this verdict is unknown: "+redact(err.Error()), g.opts)
		return
	case d.IsZero():
		return
	}
	if !judge.Demote(v, judge.Decision(d.Verdict), d.ReasonCode, redact(d.Message), g.opts) {
		g.m.logger.Warn("ignored a verdict hook answer that is not a demotion", "kind", g.inst.Kind(), "from", v.Decision, "to", d.Verdict)
	}
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
func (g *group) compensate(ctx context.Context, k int, v *judge.Verdict) *judge.Task {
	c, index, cand := g.effects[k], g.cm.Effects[k], g.cand
	plan, ok := compensate.Applies(cand.Compensator, c, v)
	if !ok {
		return nil // the ordinary reconciliation task stands
	}
	m := g.m
	ctx, span := telemetry.Start(ctx, telemetry.SpanCompensate, telemetry.KeyEffectIndex.Int(index),
		telemetry.KeyEffectKind.String(string(c.Kind)), telemetry.KeyKind.String(cand.Kind))
	defer span.End()
	allow := func(string) bool { return false }
	if m.daemon != nil {
		allow = m.daemon.AllowSecret
	}
	failed := func(deleted []judge.Record, why error) *judge.Task {
		telemetry.Fail(span, "compensation_failed")
		telemetry.Set(span, telemetry.KeyDeleted.Int(len(deleted)))
		// A failed DELETE's error may quote the URL, and so an identity.
		msg := m.secretMask(cand).text(cand.Redaction.RedactText(why.Error(), []*judge.Contract{c}, v.Matched))
		m.logger.Error("compensation failed", "session", g.id, "effect", index, "deleted", len(deleted), "error", msg)
		return judge.NewTask(g.id, index, cand.Kind, c, v, judge.TaskOptions{CompensationFailed: true, Deleted: deleted, Digest: m.evidence().digester()})
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
	// Re-verify this effect alone against the original baseline.
	telemetry.Set(span, telemetry.KeyDeleted.Int(len(deleted)))
	nv := g.judgeRead(ctx, g.read(ctx, 0))[k]
	nv.Reasons = append(nv.Reasons, judge.Reason{Code: ReasonCompensated,
		Message: fmt.Sprintf("the compensator deleted %d duplicate(s); this verdict re-verifies against the original baseline", len(deleted))})
	*v = nv
	m.logger.Info("compensated duplicates", "session", g.id, "effect", index, "deleted", len(deleted), "verdict", nv.Decision)
	if nv.Decision != judge.Confirmed {
		return judge.NewTask(g.id, index, cand.Kind, c, v, judge.TaskOptions{CompensationFailed: true, Deleted: deleted, Digest: m.evidence().digester()})
	}
	return nil
}

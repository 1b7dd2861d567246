package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// A candidate's census (config.Candidate.Census) is read beside its
// baseline at Begin and beside every after read at Verify, through an
// adapter instance of its own configured with the census section, and
// passed to the judge (judge.Options.Census). Of each census record only
// the identity fields of the group's contracts are kept, and under
// judge.CensusDigestField the keyed digest (the evidence key's HMAC) of the
// whole record as read: the census says which records exist and whether
// one changed in place (UNEXPLAINED_CHANGE), no value. Under a redaction
// policy that hides an identity field the stored census holds it keyed, as
// a baseline does.

// censusMeta is what the session meta keeps of a stored census.
type censusMeta struct {
	Reachable bool   `json:"reachable"`
	Reason    string `json:"reason,omitempty"`
	Records   int    `json:"records"`
	// Fields are the identity fields kept of each record.
	Fields []string `json:"fields"`
	// KeyID names the evidence key hidden identities were keyed with;
	// empty when none is hidden.
	KeyID string `json:"key_id,omitempty"`
}

// censusFields are the identity fields of a group's contracts that judge
// newness or loss (judge.NeedsBaseline); nil when none does, and then no
// census is read.
func censusFields(group []*judge.Contract) []string {
	var out []string
	for _, c := range group {
		if judge.NeedsBaseline(c) && !slices.Contains(out, c.IdentityField) {
			out = append(out, c.IdentityField)
		}
	}
	return out
}

// census configures the census of candidate ci: its own section, the
// candidate's credentials, no run parameter.
func (conf *configurer) census(ctx context.Context, dep *config.Deployment, ci int, contracts []*judge.Contract) (*pluginhost.Instance, error) {
	c := dep.Candidates[ci].Census
	path := candidatePath(dep, ci) + ".census"
	cfg, secrets, err := c.Resolve(nil, conf.lookupEnv, conf.allow)
	if err != nil {
		return nil, &Error{Kind: Refused, Reason: resolveReason(refusal.CodeOf(err)), Path: path, Message: err.Error()}
	}
	inst, err := conf.host.Instance(ctx, pluginhost.Spec{
		Kind: c.Kind, ConfigJSON: cfg, Params: map[string]string{}, Secrets: secrets,
		EffectTimeout: effectTimeout(contracts), ParamsChecked: true,
	})
	if err != nil {
		if ce, ok := errors.AsType[*refusal.Error](err); ok {
			if ce.Path != "" {
				path += "." + ce.Path
			}
			return nil, &Error{Kind: Invalid, Path: path, Message: ce.Message}
		}
		return nil, &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: fmt.Sprintf("the census of candidate %d (%s) is not available: %v", ci, c.Kind, err)}
	}
	return inst, nil
}

// censusRequest is a census capture: the group's first effect, no
// selector (a census reads the whole collection).
func censusRequest(id, phase string, n int, contracts []*judge.Contract, effects []int) sdk.CaptureRequest {
	req := captureRequest(id, phase, n, contracts, effects)
	req.Selector = map[string]string{}
	// A census keeps only the identity fields of its records and compares
	// no value.
	req.ReadFields, req.ExpectedValues = censusFields(groupOf(contracts, effects)), nil
	return req
}

// censusReader reads censuses: it keeps of each record its identity
// fields and a digest under the evidence keys, and counts the records in
// metrics (nil: none).
type censusReader struct {
	keys    evidenceKeys
	metrics *metrics.Metrics
}

// readCensus reads a census once, keeping of each record only fields. An
// unreachable census, or a record that is not one JSON object, is an
// unreachable snapshot with the reason.
func (m censusReader) readCensus(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest, before bool, fields []string) judge.Snapshot {
	read := inst.CaptureAfter
	if before {
		read = inst.CaptureBefore
	}
	capt, err := read(ctx, req)
	if err != nil {
		return judge.Snapshot{Reason: err.Error()}
	}
	defer capt.Close()
	if !capt.Reachable {
		return unreachableCapture(capt)
	}
	s := judge.Snapshot{Reachable: true, Records: []judge.Record{}}
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return judge.Snapshot{Reason: err.Error()}
		}
		for _, raw := range batch {
			r, err := decodeRecord(raw)
			if err != nil {
				return judge.Snapshot{Reason: "the census sent a record that is not one JSON object: " + err.Error()}
			}
			s.Records = append(s.Records, m.censusRecord(r, fields))
		}
	}
	phase := "after"
	if before {
		phase = "before"
	}
	m.metrics.Captured(inst.Kind(), "census_"+phase, len(s.Records), 0)
	return s
}

// censusRecord is what a census keeps of record r: its identity fields,
// and the keyed digest of the whole record, so that the judge sees a
// record changed in place without the census holding its values.
func (m censusReader) censusRecord(r judge.Record, fields []string) judge.Record {
	kept := make(judge.Record, len(fields)+1)
	for _, f := range fields {
		if v, ok := r[f]; ok {
			kept[f] = v
		}
	}
	kept[judge.CensusDigestField] = m.keys.digester()(r)
	return kept
}

// censusUnusable is the first of the group's contracts the census cannot
// serve (judge.CensusUsable), with the judge's reason.
func censusUnusable(group []*judge.Contract, s judge.Snapshot) (int, string) {
	for k, c := range group {
		if !judge.NeedsBaseline(c) {
			continue
		}
		if ok, reason := judge.CensusUsable(c, s); !ok {
			return k, reason
		}
	}
	return -1, ""
}

// captureCensus reads and stores capture n's census at Begin. An unusable
// census (unreachable, or a record without a contract's identity field)
// refuses the session as an unreadable baseline does: the client must not
// actuate.
func (m *Manager) captureCensus(ctx context.Context, id string, n int, dep *config.Deployment, ci int, contracts []*judge.Contract, effects []int) (*censusMeta, store.BaselineWriter, error) {
	group := groupOf(contracts, effects)
	fields := censusFields(group)
	if dep.Candidates[ci].Census == nil || len(fields) == 0 {
		return nil, nil, nil
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanCaptureCensus, append(effectAttrs(contracts, effects),
		telemetry.KeySession.String(id), telemetry.KeyGroup.Int(n), telemetry.KeyKind.String(dep.Candidates[ci].Kind))...)
	defer span.End()
	inst, err := m.configurer().census(ctx, dep, ci, contracts)
	if err != nil {
		telemetry.Fail(span, "census_unavailable")
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, baselineReadTimeout(contracts))
	defer cancel()
	s := censusReader{m.keys, m.metrics}.readCensus(ctx, inst, censusRequest(id, "census-before", n, contracts, effects), true, fields)
	redaction := dep.Candidates[ci].Redaction
	if k, reason := censusUnusable(group, s); k >= 0 {
		telemetry.Fail(span, "census_unusable")
		reason = redaction.RedactText(reason, group)
		return nil, nil, &Error{Kind: Refused, Code: judge.ReasonCensusUnusable, Path: fmt.Sprintf("effects[%d]", effects[k]),
			Message: fmt.Sprintf("the census of %s (%s) cannot serve this contract (%s); do not actuate", candidatePath(dep, ci), dep.Candidates[ci].Kind, reason)}
	}
	telemetry.Set(span, telemetry.KeyRecords.Int(len(s.Records)), telemetry.KeyReachable.Bool(true))
	cm := &censusMeta{Reachable: true, Records: len(s.Records), Fields: fields}
	keyer := m.evidence().newBaselineKeyer(redaction)
	if keyer != nil {
		cm.KeyID = judge.KeyID(m.evidence().key())
	}
	w := m.store.NewBaseline(id, store.CensusCapture(n))
	for _, r := range s.Records {
		if keyer != nil {
			r = keyer.p.KeyBaseline(keyer.k, r)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, nil, err
		}
		if err := w.Add(ctx, raw); err != nil {
			return nil, nil, fmt.Errorf("storing the census: %w", err)
		}
	}
	return cm, w, nil
}

// groupCensus is a group's census at Verify: the stored one and the
// instance that reads it again.
type groupCensus struct {
	meta   *censusMeta
	fields []string
	inst   *pluginhost.Instance
	err    error // the census instance could not be configured
	before judge.Snapshot
	after  judge.Snapshot
}

// startCensus prepares the group's census: the stored before census and
// the census instance. Nothing when the group stored none.
func (g *group) startCensus(ctx context.Context, dep *config.Deployment) {
	cm := g.cm.Census
	if cm == nil {
		return
	}
	gc := &groupCensus{meta: cm, fields: cm.Fields}
	g.census = gc
	if dep.Candidates[g.cm.Candidate].Census == nil {
		gc.err = errors.New("the deployment no longer declares this candidate's census")
	} else {
		gc.inst, gc.err = g.m.configurer().census(ctx, dep, g.cm.Candidate, g.contracts)
	}
	gc.before = judge.Snapshot{Reason: cm.Reason}
	if !cm.Reachable {
		return
	}
	recs := []judge.Record{}
	err := g.m.store.ReadBaseline(ctx, g.id, store.CensusCapture(g.n), func(raw []byte) error {
		r, err := decodeRecord(raw)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if _, ok := errors.AsType[*store.IntegrityError](err); ok {
		g.ev.censusLoss = err
	}
	switch {
	case err != nil:
		gc.before = judge.Snapshot{Reason: "the stored census could not be read: " + err.Error()}
	case len(recs) != cm.Records:
		gc.before = judge.Snapshot{Reason: fmt.Sprintf("the stored census holds %d records, Begin stored %d", len(recs), cm.Records)}
	case cm.KeyID != "" && cm.KeyID != judge.KeyID(g.m.evidence().key()):
		gc.before = judge.Snapshot{Reason: "the stored census was keyed with another evidence key; restore keys/evidence-hmac.key of this data dir"}
	default:
		gc.before = judge.Snapshot{Reachable: true, Records: recs}
	}
}

// readCensus reads the group's after census, beside an after read.
func (g *group) readCensus(ctx context.Context) {
	gc := g.census
	if gc == nil {
		return
	}
	if gc.err != nil {
		gc.after = judge.Snapshot{Reason: g.cand.Redaction.RedactText(gc.err.Error(), g.effects)}
		g.ev.Census = &receipt.CensusReads{Before: g.m.evidence().readDigest(gc.before)}
		return
	}
	req := censusRequest(g.id, "census-after", g.n, g.contracts, g.cm.Effects)
	ctx, span := telemetry.Start(ctx, telemetry.SpanCaptureCensus, telemetry.KeyGroup.Int(g.n), telemetry.KeyKind.String(g.cand.Kind))
	defer span.End()
	readCtx, cancel := context.WithTimeout(ctx, max(g.timeout, baselineReadTimeout(g.contracts)))
	defer cancel()
	gc.after = censusReader{g.m.keys, g.m.metrics}.readCensus(readCtx, gc.inst, req, false, gc.fields)
	telemetry.Set(span, telemetry.KeyRecords.Int(len(gc.after.Records)), telemetry.KeyReachable.Bool(gc.after.Reachable))
	if !gc.after.Reachable {
		telemetry.Fail(span, "unreachable")
	}
	gc.after.Reason = g.cand.Redaction.RedactText(gc.after.Reason, g.effects)
	g.ev.Census = &receipt.CensusReads{Before: g.m.evidence().readDigest(gc.before), After: g.m.evidence().readDigest(gc.after)}
}

// censusOption is the census the judge is given for one after read, its
// hidden identities restored from the after census and the after read
// where they are read again. It notes what the read saw of the whole
// collection in the group's evidence (noteCollection).
func (g *group) censusOption(after *read) *judge.Census {
	gc := g.census
	if gc == nil {
		g.noteCollection(nil, after)
		return nil
	}
	g.noteCollection(&gc.after, after)
	before := gc.before
	if gc.meta.KeyID != "" && before.Reachable {
		seen := append(slices.Clone(gc.after.Records), after.records()...)
		before.Records = g.cand.Redaction.NewRestorer(g.baseline.keyer, g.effects, seen).Restore(slices.Clone(before.Records))
	}
	return &judge.Census{Before: before, After: gc.after}
}

// newnessOf is how a candidate's change claims prove newness, what its
// loss checks see and, with a census, how the census is known to cover the
// collection (proven or declared), as results and receipts record them
// per effect.
func newnessOf(c *config.Candidate) (newness, scope, censusScope string) {
	return c.NewnessOf(), c.CollateralScope(), c.CensusScope
}

// checkNewness applies policy.require_proven_newness to the selected
// candidates, before anything is read.
func checkNewness(p workflow.Effective, dep *config.Deployment, effects []byte, res *BeginResult) error {
	list, err := effectsList(effects)
	if err != nil {
		return err
	}
	for i, e := range list {
		if i >= len(res.Effects) {
			break
		}
		r := readerOf(dep, res.Effects[i].CandidateIndex)
		if fs := workflow.CheckNewness(p, e, r, i, fmt.Sprintf("effects[%d]", i)); len(fs) > 0 {
			return findingError(fs[0])
		}
	}
	return nil
}

// unreachableCapture is the snapshot of a capture the adapter answered as
// unreachable: its stream drained (it holds no batches), its reason (or
// "unreachable") and the adapter's code for an incomplete read.
func unreachableCapture(capt *host.Stream) judge.Snapshot {
	for _, err := range capt.RawBatches() {
		if err != nil {
			break
		}
	}
	reason := capt.Reason
	if reason == "" {
		reason = "unreachable"
	}
	return judge.Snapshot{Reason: reason, Code: capt.Code}
}

package session

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// readBudget is the least time one after read may take. timeout_s is the
// settlement window (how long Verify waits for the write to show), not a
// budget for one read: a read that needs a connection, a login and a
// listing must not fail only because the window is short, or a loaded
// machine turns a clear REFUTED into an unreachable system of record.
const readBudget = 10 * time.Second

// readGrace is how much longer the daemon waits for an after read than the
// capture's Timeout tells the adapter, so that an adapter keeping to its
// Timeout answers with its own reason before the daemon gives up on it.
const readGrace = 2 * time.Second

// readTimeout bounds one after read: the settlement window, or readBudget
// when that is longer.
func readTimeout(window time.Duration) time.Duration {
	return max(window, readBudget)
}

// baselineReadTimeout bounds a baseline read: at least a minute, or the
// step's longest settlement window if that is longer.
func baselineReadTimeout(contracts []*judge.Contract) time.Duration {
	return max(time.Minute, effectTimeout(contracts))
}

// captureBaseline reads one selected adapter's baseline once, streaming its
// records into the store. A needed baseline that cannot be read completely
// refuses the session.
func (m *Manager) captureBaseline(ctx context.Context, id string, n int, inst *pluginhost.Instance, contracts []*judge.Contract, effects []int, redaction judge.Redaction, secrets secretMask) (captureMeta, store.BaselineWriter, error) {
	cm := captureMeta{Effects: effects}
	var needed []string
	for _, i := range effects {
		if judge.NeedsBaseline(contracts[i]) {
			needed = append(needed, fmt.Sprintf("effects[%d]", i))
		}
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanCaptureBefore, append(effectAttrs(contracts, effects),
		telemetry.KeySession.String(id), telemetry.KeyGroup.Int(n),
		telemetry.KeyKind.String(inst.Kind()), telemetry.KeyTier.Int(int(inst.Info().Tier)))...)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, baselineReadTimeout(contracts))
	defer cancel()
	sb, err := m.streamBaseline(ctx, id, n, inst, captureRequest(id, "before", n, contracts, effects), groupOf(contracts, effects), redaction, secrets)
	reason, count, w := sb.reason, sb.count, sb.w
	if ce, refused := errors.AsType[*refusal.Error](err); refused {
		// The run parameters do not bind (nothing was read): the
		// session is refused as invalid input, as CheckParams refuses.
		telemetry.Fail(span, "params_refused")
		return cm, nil, ce
	}
	cm.Records = count
	telemetry.Set(span, telemetry.KeyRecords.Int(count), telemetry.KeyReachable.Bool(err == nil && reason == ""))
	if err != nil {
		telemetry.Fail(span, "capture_failed")
	}
	if err != nil {
		reason = err.Error()
	}
	// Adapter text, kept in the store and shown to the client.
	reason = secrets.text(redaction.RedactText(reason, groupOf(contracts, effects)))
	if redaction.Active() {
		cm.KeyID = judge.KeyID(m.evidence().key())
	}
	cm.Reachable = reason == ""
	cm.Reason = reason
	if cm.Reachable && sb.indexed {
		cm.Index, cm.Digest, cm.DigestKeyID = baselineIndexV1, sb.digest, judge.KeyID(m.EvidenceDigestKey())
	}
	if !cm.Reachable && len(needed) > 0 {
		return cm, nil, &Error{Kind: Refused, Path: strings.Join(needed, ", "),
			Message: fmt.Sprintf("the baseline from %s could not be read (%s) and these contracts need it; do not actuate", inst.Kind(), reason)}
	}
	if !cm.Reachable {
		w = nil
	}
	return cm, w, nil
}

// streamedBaseline is what streamBaseline stored.
type streamedBaseline struct {
	reason  string // "" when read completely
	count   int
	w       store.BaselineWriter // its last chunk is committed by CreateSession
	indexed bool                 // stored as an index (judge.RecordStream.Index)
	digest  string               // an index's read digest ("" if a record did not decode)
}

// streamBaseline copies a capture into the store. Without a redaction
// policy (group.projection's condition) the records are stored as an
// index: each kept only as far as the group's contracts read it
// (judge.ProjectBaseline), the read's digest taken from the whole records
// as they arrive; under one, whole (keyed where the policy hides values).
//
// A record that carries one of the candidate's secret values is stored
// with a placeholder in place of the value (secretMask), which Verify
// restores: the store never holds a credential, and the baseline's digest
// is taken over what is stored.
func (m *Manager) streamBaseline(ctx context.Context, id string, n int, inst *pluginhost.Instance, req sdk.CaptureRequest, group []*judge.Contract, redaction judge.Redaction, secrets secretMask) (streamedBaseline, error) {
	capt, err := inst.CaptureBefore(ctx, req)
	if err != nil {
		return streamedBaseline{}, err
	}
	defer capt.Close()
	if !capt.Reachable {
		// Drain the stream (an unreachable read has no batches).
		for _, err := range capt.RawBatches() {
			if err != nil {
				break
			}
		}
		if capt.Reason == "" {
			return streamedBaseline{reason: "unreachable"}, nil
		}
		return streamedBaseline{reason: capt.Reason}, nil
	}
	w := m.store.NewBaseline(id, n)
	keyer := m.evidence().newBaselineKeyer(redaction) // nil when nothing is hidden
	var ix *judge.RecordStream                        // indexes the records (RecordStream.Index)
	var mac hash.Hash
	if !redaction.Active() {
		mac = judge.NewKeyedHash(m.EvidenceDigestKey())
		ix = judge.NewRecordStream("records", 0)
		ix.Digest(mac)
		ix.Project(judge.ProjectBaseline(group))
	}
	count, size := 0, 0
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return streamedBaseline{count: count}, keyer.maskErr(err)
		}
		for _, rec := range batch {
			if rec, err = secrets.storeRaw(rec); err != nil {
				return streamedBaseline{count: count}, fmt.Errorf("masking a secret in a baseline record: %w", err)
			}
			switch {
			case ix != nil:
				size += len(rec) // as the adapter sent it
				rec = ix.Index(rec)
			case keyer != nil:
				// The store never holds a hidden value in clear.
				if rec, err = keyer.key(rec); err != nil {
					return streamedBaseline{count: count}, err
				}
			}
			if err := w.Add(ctx, rec); err != nil {
				return streamedBaseline{count: count}, fmt.Errorf("storing the baseline: %w", err)
			}
			count++
			if ix == nil {
				size += len(rec)
			}
		}
	}
	m.metrics.Captured(inst.Kind(), "before", count, size)
	out := streamedBaseline{count: count, w: w, indexed: ix != nil}
	if ix != nil && ix.IndexErr() == nil {
		// A record that did not decode is stored as it arrived, and no
		// digest: Verify finds the baseline unreadable, as it would have
		// found the record.
		out.digest = judge.KeyedSum(mac)
	}
	return out, nil
}

func captureRequest(id, phase string, n int, contracts []*judge.Contract, effects []int) sdk.CaptureRequest {
	req := sdk.CaptureRequest{
		CaptureID:   fmt.Sprintf("%s/%s/%d/%d", id, phase, n, time.Now().UnixNano()),
		EffectIndex: effects[0],
		Timeout:     readTimeout(effectTimeout(contracts)),
	}
	// One read serves every effect of the group; a selector or identity
	// field is only a hint when every effect of the group agrees on it.
	first := contracts[effects[0]]
	req.IdentityField = first.IdentityField
	req.ContractHash = first.Hash
	req.EffectKind = string(first.Kind)
	if len(effects) == 1 {
		req.Selector = map[string]string{}
		for _, p := range first.Match {
			req.Selector[p.Field] = p.Value
		}
	}
	for _, i := range effects[1:] {
		if contracts[i].IdentityField != first.IdentityField {
			req.IdentityField = ""
		}
	}
	req.ReadFields, req.ExpectedValues = contractReads(contracts, effects, "")
	return req
}

// dropTimeout bounds the removal of an uncommitted baseline.
const dropTimeout = 10 * time.Second

// dropBaseline removes the chunks of a Begin that did not commit, also
// when the Begin failed because its ctx ended (within dropTimeout). A
// failure leaves orphans that the store's cleanup removes later.
func (m *Manager) dropBaseline(ctx context.Context, id string) {
	m.releaseWriteSets(ctx, id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	if err := m.store.DropBaseline(ctx, id); err != nil {
		m.logger.Warn("dropping an uncommitted baseline; the orphan cleanup will remove it", "session", id, "error", err)
	}
}

package toproto

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// GetInfoResponse describes an adapter speaking apiVersions.
func GetInfoResponse(info sdk.Info, apiVersions []string) *adapterv1.GetInfoResponse {
	return &adapterv1.GetInfoResponse{
		Kind:            info.Kind,
		ApiVersions:     apiVersions,
		Tier:            int32(info.Tier),
		NeedsBaseline:   info.NeedsBaseline,
		AbsenceNotProof: info.AbsenceNotProof,
		Description:     info.Description,

		MaxConcurrentCaptures: int32(max(0, info.MaxConcurrentCaptures)),
	}
}

// ConfigureRequest converts the daemon's configure call.
func ConfigureRequest(r sdk.ConfigureRequest) *adapterv1.ConfigureRequest {
	return &adapterv1.ConfigureRequest{
		Kind:          r.Kind,
		ConfigJson:    r.Config,
		Secrets:       r.Secrets,
		EffectTimeout: Duration(r.EffectTimeout),
		ApiVersion:    r.APIVersion,
	}
}

// ConfigureResponse turns an adapter's Configure result into the wire answer.
// Every error is a refusal; a *refusal.Error keeps its field path.
func ConfigureResponse(instanceID string, err error) *adapterv1.ConfigureResponse {
	if err == nil {
		return &adapterv1.ConfigureResponse{Ok: true, InstanceId: instanceID}
	}
	return &adapterv1.ConfigureResponse{Refusal: Refusal(err)}
}

// Refusal converts an error into a refusal; a *refusal.Error keeps its
// field path.
func Refusal(err error) *adapterv1.ConfigRefusal {
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		return &adapterv1.ConfigRefusal{Path: ce.Path, Message: ce.Message}
	}
	return &adapterv1.ConfigRefusal{Message: err.Error()}
}

// RefusalChunk opens (and, with a trailer of 0, is) a capture stream whose
// run parameters could not be bound.
func RefusalChunk(err error, now func() time.Time) *adapterv1.CaptureChunk {
	h := &adapterv1.CaptureHeader{
		UnreachableReason: "run parameters refused: " + err.Error(),
		CapturedAt:        timestamppb.New(now()),
		Refusal:           Refusal(err),
	}
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Header{Header: h}}
}

// TestConnectionResponse converts a preflight result.
func TestConnectionResponse(r sdk.TestResult) *adapterv1.TestConnectionResponse {
	return &adapterv1.TestConnectionResponse{
		Reachable: r.Reachable,
		Message:   r.Message,
		Warnings:  r.Warnings,
		Latency:   Duration(r.Latency),
	}
}

// CaptureSpec converts what the daemon asks an adapter to read.
func CaptureSpec(r sdk.CaptureRequest) *adapterv1.CaptureSpec {
	return &adapterv1.CaptureSpec{
		CaptureId:      r.CaptureID,
		EffectIndex:    int32(r.EffectIndex),
		Selector:       r.Selector,
		IdentityField:  r.IdentityField,
		Timeout:        Duration(r.Timeout),
		ContractHash:   r.ContractHash,
		EffectKind:     r.EffectKind,
		ReadFields:     r.ReadFields,
		ExpectedValues: expectedValues(r.ExpectedValues),
	}
}

// expectedValues converts CaptureRequest.ExpectedValues; nil when none.
func expectedValues(m map[string][]string) map[string]*adapterv1.ExpectedValues {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*adapterv1.ExpectedValues, len(m))
	for f, v := range m {
		out[f] = &adapterv1.ExpectedValues{Values: v}
	}
	return out
}

// HeaderChunk opens a capture stream. A zero At becomes now.
func HeaderChunk(c sdk.Capture, now func() time.Time) *adapterv1.CaptureChunk {
	at := c.At
	if at.IsZero() {
		at = now()
	}
	h := &adapterv1.CaptureHeader{Reachable: c.Reachable, CapturedAt: timestamppb.New(at)}
	if !c.Reachable {
		h.UnreachableReason = c.Reason
		if h.UnreachableReason == "" {
			h.UnreachableReason = "the adapter gave no reason"
		}
		h.UnreachableCode = c.Code
	}
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Header{Header: h}}
}

// BatchChunk carries a batch of records.
func BatchChunk(batch *adapterv1.RecordBatch) *adapterv1.CaptureChunk {
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Batch{Batch: batch}}
}

// TrailerChunk closes a complete capture stream.
func TrailerChunk(count int64) *adapterv1.CaptureChunk {
	return &adapterv1.CaptureChunk{Chunk: &adapterv1.CaptureChunk_Trailer{Trailer: &adapterv1.CaptureTrailer{RecordCount: count}}}
}

// endBytes bounds what one record adds to a batch on the wire besides its
// own bytes: its end offset, a varint of at most 5 bytes.
const endBytes = 5

// Batcher encodes records straight into packed batches (RecordBatch.records
// and ends) bounded by a record count and a byte size, so that no message
// carries a whole read set and none exceeds the transport's message limit.
// A batch's records share one buffer: no allocation per record.
type Batcher struct {
	MaxRecords int
	MaxBytes   int

	enc  Encoder
	buf  []byte
	ends []uint32
	// The last full batch's sizes, to size the next one's buffers.
	lastBytes, lastCount int
}

// Add encodes r onto the open batch and returns its encoded size, which the
// caller bounds. When r does not fit the open batch, that batch (which holds
// at least one record) is returned as full, to send first, and r opens the
// next. A record alone larger than MaxBytes still forms a batch of one.
func (b *Batcher) Add(r sdk.Record) (full *adapterv1.RecordBatch, size int, err error) {
	if b.buf == nil {
		// Small reads stay small; a large one grows its first batch by
		// appending and sizes the next ones from the last.
		b.buf = make([]byte, 0, max(512, b.lastBytes+b.lastBytes/8))
		b.ends = make([]uint32, 0, max(8, b.lastCount))
	}
	start := len(b.buf)
	out, err := b.enc.Append(b.buf, r)
	if err != nil {
		return nil, 0, err
	}
	size = len(out) - start
	if uint64(len(out)) > math.MaxUint32 {
		return nil, size, fmt.Errorf("a record of %d bytes does not fit a batch", size)
	}
	b.buf = out
	if n := len(b.ends); n > 0 && (n >= b.MaxRecords || start+endBytes*n+size+endBytes > b.MaxBytes) {
		full = &adapterv1.RecordBatch{Records: b.buf[:start:start], Ends: b.ends}
		b.lastBytes, b.lastCount = start, n
		next := make([]byte, size, max(size, start+start/8))
		copy(next, b.buf[start:])
		b.buf, b.ends = next, make([]uint32, 0, n)
	}
	b.ends = append(b.ends, uint32(len(b.buf)))
	return full, size, nil
}

// Flush returns the open batch, if it holds any record, and starts afresh.
func (b *Batcher) Flush() *adapterv1.RecordBatch {
	if len(b.ends) == 0 {
		return nil
	}
	full := &adapterv1.RecordBatch{Records: b.buf, Ends: b.ends}
	b.lastBytes, b.lastCount = len(b.buf), len(b.ends)
	b.buf, b.ends = nil, nil
	return full
}

// VerdictRequest converts the daemon's verdict for a VerdictHook.
func VerdictRequest(r sdk.VerdictRequest) *adapterv1.VerdictRequest {
	out := &adapterv1.VerdictRequest{
		CaptureId:     r.CaptureID,
		EffectIndex:   int32(r.EffectIndex),
		ContractHash:  r.ContractHash,
		Verdict:       Verdict(r.Verdict),
		ObservedCount: r.ObservedCount,
		ExpectedCount: r.ExpectedCount,
		Tier:          int32(r.Tier),
		Params:        r.Params,
	}
	for _, reason := range r.Reasons {
		out.Reasons = append(out.Reasons, &adapterv1.Reason{Code: reason.Code, Message: reason.Message})
	}
	return out
}

// VerdictResponse converts a hook's answer; the zero Demotion is no demotion.
func VerdictResponse(d sdk.Demotion) *adapterv1.VerdictResponse {
	if d.IsZero() {
		return &adapterv1.VerdictResponse{}
	}
	return &adapterv1.VerdictResponse{Demotion: &adapterv1.Demotion{
		Verdict:    Verdict(d.Verdict),
		ReasonCode: d.ReasonCode,
		Message:    d.Message,
	}}
}

// Verdicts pairs each verdict with its enum: the one table both
// directions read (fromproto.Verdict maps back).
var Verdicts = [...]struct {
	Verdict sdk.Verdict
	Enum    adapterv1.Verdict
}{
	{sdk.VerdictConfirmed, adapterv1.Verdict_VERDICT_CONFIRMED},
	{sdk.VerdictRefuted, adapterv1.Verdict_VERDICT_REFUTED},
	{sdk.VerdictIndeterminate, adapterv1.Verdict_VERDICT_INDETERMINATE},
}

// Verdict maps a verdict to its enum; anything unknown is UNSPECIFIED.
func Verdict(v sdk.Verdict) adapterv1.Verdict {
	for _, p := range Verdicts {
		if p.Verdict == v {
			return p.Enum
		}
	}
	return adapterv1.Verdict_VERDICT_UNSPECIFIED
}

// Duration converts a duration; zero stays unset.
func Duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

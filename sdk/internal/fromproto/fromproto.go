package fromproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Info converts a GetInfo answer and returns the API versions it lists.
func Info(r *adapterv1.GetInfoResponse) (sdk.Info, []string) {
	return sdk.Info{
		Kind:            r.GetKind(),
		Tier:            sdk.Tier(r.GetTier()),
		NeedsBaseline:   r.GetNeedsBaseline(),
		AbsenceNotProof: r.GetAbsenceNotProof(),
		Description:     r.GetDescription(),

		MaxConcurrentCaptures: int(r.GetMaxConcurrentCaptures()),
	}, r.GetApiVersions()
}

// ConfigureRequest converts the daemon's configure call.
func ConfigureRequest(r *adapterv1.ConfigureRequest) sdk.ConfigureRequest {
	return sdk.ConfigureRequest{
		Kind:          r.GetKind(),
		Config:        json.RawMessage(r.GetConfigJson()),
		Secrets:       nonNil(r.GetSecrets()),
		EffectTimeout: Duration(r.GetEffectTimeout()),
		APIVersion:    r.GetApiVersion(),
	}
}

// ConfigureResponse turns the wire answer back into the instance id or a
// *refusal.Error.
func ConfigureResponse(r *adapterv1.ConfigureResponse) (string, error) {
	if ref := r.GetRefusal(); ref != nil {
		return "", Refusal(ref)
	}
	if !r.GetOk() {
		return "", &refusal.Error{Message: "the adapter refused the configuration without saying why"}
	}
	return r.GetInstanceId(), nil
}

// Refusal converts a refusal; nil stays nil.
func Refusal(ref *adapterv1.ConfigRefusal) error {
	if ref == nil {
		return nil
	}
	return &refusal.Error{Path: ref.GetPath(), Message: ref.GetMessage()}
}

// TestResult converts a preflight answer.
func TestResult(r *adapterv1.TestConnectionResponse) sdk.TestResult {
	return sdk.TestResult{
		Reachable: r.GetReachable(),
		Message:   r.GetMessage(),
		Warnings:  r.GetWarnings(),
		Latency:   Duration(r.GetLatency()),
	}
}

// CaptureRequest converts what the daemon asks an adapter to read, with the
// session's run parameters.
func CaptureRequest(s *adapterv1.CaptureSpec, params map[string]string) sdk.CaptureRequest {
	return sdk.CaptureRequest{
		CaptureID:      s.GetCaptureId(),
		EffectIndex:    int(s.GetEffectIndex()),
		Selector:       nonNil(s.GetSelector()),
		IdentityField:  s.GetIdentityField(),
		Timeout:        Duration(s.GetTimeout()),
		ContractHash:   s.GetContractHash(),
		EffectKind:     s.GetEffectKind(),
		Params:         nonNil(params),
		ReadFields:     s.GetReadFields(),
		ExpectedValues: expectedValues(s.GetExpectedValues()),
	}
}

// expectedValues converts CaptureSpec.expected_values; nil when none.
func expectedValues(m map[string]*adapterv1.ExpectedValues) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(m))
	for f, v := range m {
		out[f] = v.GetValues()
	}
	return out
}

// Header is the opening of a capture stream.
type Header struct {
	Reachable bool
	Reason    string
	// Code is the unreachable read's reason code (sdk.Capture.Code).
	Code string
	At   time.Time
	// Refusal is a *refusal.Error when the run parameters could not be
	// bound; nil otherwise.
	Refusal error
}

// CaptureHeader converts a stream's header.
func CaptureHeader(h *adapterv1.CaptureHeader) Header {
	out := Header{Reachable: h.GetReachable(), Reason: h.GetUnreachableReason(), Code: h.GetUnreachableCode(), Refusal: Refusal(h.GetRefusal())}
	if h.GetCapturedAt() != nil {
		out.At = h.GetCapturedAt().AsTime()
	}
	return out
}

// VerdictRequest converts the daemon's verdict for a VerdictHook.
func VerdictRequest(r *adapterv1.VerdictRequest) sdk.VerdictRequest {
	out := sdk.VerdictRequest{
		CaptureID:     r.GetCaptureId(),
		EffectIndex:   int(r.GetEffectIndex()),
		ContractHash:  r.GetContractHash(),
		Verdict:       Verdict(r.GetVerdict()),
		ObservedCount: r.ObservedCount,
		ExpectedCount: r.ExpectedCount,
		Tier:          sdk.Tier(r.GetTier()),
		Params:        nonNil(r.GetParams()),
	}
	for _, reason := range r.GetReasons() {
		out.Reasons = append(out.Reasons, sdk.Reason{Code: reason.GetCode(), Message: reason.GetMessage()})
	}
	return out
}

// Demotion converts a hook's answer; no demotion is the zero Demotion.
func Demotion(r *adapterv1.VerdictResponse) sdk.Demotion {
	d := r.GetDemotion()
	if d == nil {
		return sdk.Demotion{}
	}
	v := Verdict(d.GetVerdict())
	if v == "" {
		// A demotion the daemon cannot read still says "do not trust this":
		// take the cautious reading rather than letting the verdict stand.
		v = sdk.VerdictIndeterminate
	}
	return sdk.Demotion{Verdict: v, ReasonCode: d.GetReasonCode(), Message: d.GetMessage()}
}

// Verdict maps the enum back; UNSPECIFIED (or an unknown value) is "".
func Verdict(v adapterv1.Verdict) sdk.Verdict {
	for _, p := range toproto.Verdicts {
		if p.Enum == v {
			return p.Verdict
		}
	}
	return ""
}

// Duration converts a duration; unset is zero.
func Duration(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Batch returns the records of a batch, each a slice of the batch's one
// buffer (capped, so appending to one never overwrites the next). A packed
// batch must have strictly increasing ends, the last one at the end of its
// records; a batch may fill the packed form or the unpacked one
// (records_json), never both. Any inconsistency is an error: the read is
// unusable.
func Batch(b *adapterv1.RecordBatch) ([][]byte, error) {
	packed, ends := b.GetRecords(), b.GetEnds()
	if legacy := b.GetRecordsJson(); len(legacy) > 0 {
		if len(packed) > 0 || len(ends) > 0 {
			return nil, errors.New("a record batch fills both records_json and the packed records")
		}
		return legacy, nil
	}
	if len(ends) == 0 {
		if len(packed) > 0 {
			return nil, fmt.Errorf("a record batch carries %d bytes of records and no record ends", len(packed))
		}
		return nil, nil
	}
	if last := ends[len(ends)-1]; uint64(last) != uint64(len(packed)) {
		return nil, fmt.Errorf("a record batch's last record ends at byte %d of its %d bytes", last, len(packed))
	}
	out := make([][]byte, len(ends))
	var start uint32
	for i, end := range ends {
		if end <= start || uint64(end) > uint64(len(packed)) {
			return nil, fmt.Errorf("record %d of a batch ends at byte %d, not after the previous end %d and within the batch's %d bytes", i, end, start, len(packed))
		}
		out[i] = packed[start:end:end]
		start = end
	}
	return out, nil
}

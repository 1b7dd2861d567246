package fromproto

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	adapterv1 "github.com/verifierd/verifierd/proto/verifierd/adapter/v1"
	"github.com/verifierd/verifierd/sdk/internal/sdkapi"
)

// Info converts a GetInfo answer and returns the API versions it lists.
func Info(r *adapterv1.GetInfoResponse) (sdkapi.Info, []string) {
	return sdkapi.Info{
		Kind:            r.GetKind(),
		Tier:            sdkapi.Tier(r.GetTier()),
		NeedsBaseline:   r.GetNeedsBaseline(),
		AbsenceNotProof: r.GetAbsenceNotProof(),
		Description:     r.GetDescription(),
	}, r.GetApiVersions()
}

// ConfigureRequest converts the daemon's configure call.
func ConfigureRequest(r *adapterv1.ConfigureRequest) sdkapi.ConfigureRequest {
	return sdkapi.ConfigureRequest{
		Kind:          r.GetKind(),
		Config:        json.RawMessage(r.GetConfigJson()),
		Params:        nonNil(r.GetParams()),
		Secrets:       nonNil(r.GetSecrets()),
		EffectTimeout: Duration(r.GetEffectTimeout()),
		APIVersion:    r.GetApiVersion(),
	}
}

// ConfigureResponse turns the wire answer back into nil or a *ConfigError.
func ConfigureResponse(r *adapterv1.ConfigureResponse) error {
	if ref := r.GetRefusal(); ref != nil {
		return &sdkapi.ConfigError{Path: ref.GetPath(), Message: ref.GetMessage()}
	}
	if !r.GetOk() {
		return &sdkapi.ConfigError{Message: "the adapter refused the configuration without saying why"}
	}
	return nil
}

// TestResult converts a preflight answer.
func TestResult(r *adapterv1.TestConnectionResponse) sdkapi.TestResult {
	return sdkapi.TestResult{
		Reachable: r.GetReachable(),
		Message:   r.GetMessage(),
		Warnings:  r.GetWarnings(),
		Latency:   Duration(r.GetLatency()),
	}
}

// CaptureRequest converts what the daemon asks an adapter to read.
func CaptureRequest(s *adapterv1.CaptureSpec) sdkapi.CaptureRequest {
	return sdkapi.CaptureRequest{
		CaptureID:     s.GetCaptureId(),
		EffectIndex:   int(s.GetEffectIndex()),
		Selector:      nonNil(s.GetSelector()),
		IdentityField: s.GetIdentityField(),
		Timeout:       Duration(s.GetTimeout()),
		ContractHash:  s.GetContractHash(),
		EffectKind:    s.GetEffectKind(),
	}
}

// Header is the opening of a capture stream.
type Header struct {
	Reachable bool
	Reason    string
	At        time.Time
}

// CaptureHeader converts a stream's header.
func CaptureHeader(h *adapterv1.CaptureHeader) Header {
	out := Header{Reachable: h.GetReachable(), Reason: h.GetUnreachableReason()}
	if h.GetCapturedAt() != nil {
		out.At = h.GetCapturedAt().AsTime()
	}
	return out
}

// VerdictRequest converts the daemon's verdict for a VerdictHook.
func VerdictRequest(r *adapterv1.VerdictRequest) sdkapi.VerdictRequest {
	out := sdkapi.VerdictRequest{
		CaptureID:     r.GetCaptureId(),
		EffectIndex:   int(r.GetEffectIndex()),
		ContractHash:  r.GetContractHash(),
		Verdict:       Verdict(r.GetVerdict()),
		ObservedCount: r.ObservedCount,
		ExpectedCount: r.ExpectedCount,
		Tier:          sdkapi.Tier(r.GetTier()),
	}
	for _, reason := range r.GetReasons() {
		out.Reasons = append(out.Reasons, sdkapi.Reason{Code: reason.GetCode(), Message: reason.GetMessage()})
	}
	return out
}

// Demotion converts a hook's answer; no demotion is the zero Demotion.
func Demotion(r *adapterv1.VerdictResponse) sdkapi.Demotion {
	d := r.GetDemotion()
	if d == nil {
		return sdkapi.Demotion{}
	}
	v := Verdict(d.GetVerdict())
	if v == "" {
		// A demotion the daemon cannot read still says "do not trust this":
		// take the cautious reading rather than letting the verdict stand.
		v = sdkapi.VerdictIndeterminate
	}
	return sdkapi.Demotion{Verdict: v, ReasonCode: d.GetReasonCode(), Message: d.GetMessage()}
}

// Verdict maps the enum back; UNSPECIFIED (or an unknown value) is "".
func Verdict(v adapterv1.Verdict) sdkapi.Verdict {
	switch v {
	case adapterv1.Verdict_VERDICT_CONFIRMED:
		return sdkapi.VerdictConfirmed
	case adapterv1.Verdict_VERDICT_REFUTED:
		return sdkapi.VerdictRefuted
	case adapterv1.Verdict_VERDICT_INDETERMINATE:
		return sdkapi.VerdictIndeterminate
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

package session

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
)

// The session's spans (docs/operations.md, "Traces"). Their attributes are
// kinds, tiers, indices, counts and outcomes: never a parameter value, a
// record, an adapter's or error's text, or a secret.

// endBegin closes a Begin's span with its outcome.
func endBegin(span trace.Span, res *BeginResult, err error) {
	telemetry.Set(span, telemetry.KeyOutcome.String(beginOutcome(err)))
	if res != nil {
		telemetry.Set(span, telemetry.KeySession.String(res.SessionID))
	}
	if err != nil {
		telemetry.Fail(span, errKind(err))
	}
	span.End()
}

// endVerify closes a Verify's span with its outcome.
func endVerify(span trace.Span, note *verifyNote, res *Result, err error) {
	telemetry.Set(span, telemetry.KeyReplay.Bool(note.replay))
	if note.deployment != "" {
		telemetry.Set(span, telemetry.KeyDeployment.String(note.deployment))
	}
	if res != nil {
		telemetry.Set(span, telemetry.KeyOutcome.String(string(res.Outcome)))
	}
	if err != nil {
		telemetry.Fail(span, errKind(err))
	}
	span.End()
}

// endErr closes a span, failed with err's kind when err is not nil.
func endErr(span trace.Span, err error) {
	if err != nil {
		telemetry.Fail(span, errKind(err))
	}
	span.End()
}

// effectAttrs describes the effects of one capture group: their indices
// and contract kinds.
func effectAttrs(contracts []*judge.Contract, effects []int) []attribute.KeyValue {
	if !telemetry.On() {
		return nil
	}
	idx := make([]int, len(effects))
	kinds := make([]string, len(effects))
	for k, i := range effects {
		idx[k], kinds[k] = i, string(contracts[i].Kind)
	}
	return []attribute.KeyValue{telemetry.KeyEffects.IntSlice(idx), telemetry.KeyEffectKinds.StringSlice(kinds)}
}

// verdictAttr lists the decisions of a group's verdicts, in its order.
func verdictAttr(vs []judge.Verdict) attribute.KeyValue {
	if !telemetry.On() {
		return attribute.KeyValue{}
	}
	out := make([]string, len(vs))
	for k, v := range vs {
		out[k] = string(v.Decision)
	}
	return telemetry.KeyVerdicts.StringSlice(out)
}

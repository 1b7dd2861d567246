package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/hashicorp/go-hclog"
)

// APIVersion is the in-band adapter API version this SDK speaks. GetInfo
// lists it; the daemon picks a version both sides speak.
const APIVersion = "v2"

// Adapter reads one kind of system of record for the daemon. One Adapter
// value is one configured instance: the plugin builds one with its factory
// for every Configure, and a process holds many of them. The daemon calls
// Info, Configure once, Info again, then TestConnection and the captures any
// number of times, possibly concurrently, each with the session's run
// parameters: implementations must be safe for concurrent use after
// Configure returns, and substitute the parameters per call (never keep
// one call's parameters for the next).
type Adapter interface {
	// Info describes the adapter. It must not touch the system of record.
	// The daemon asks before Configure and again after it: an adapter
	// whose mechanism depends on its configuration (onscreen: re-opening
	// the record or reading the save's own screen) reports the tier of
	// that mechanism then. The daemon keeps the weaker of the two answers
	// (and, for a built-in kind, of the kind's floor): a configuration can
	// weaken a tier, never strengthen it.
	Info() Info
	// Configure receives the deployment's section for this adapter in the
	// shape sdk/unstable/deployment documents (Section), and its secrets under their
	// slots (ConfigureRequest.Secret). It sees no run parameter except a
	// plugin's option_params, which the daemon binds into options before
	// configuring: check the {param} references' shape here, bind their
	// values per call. Return a *refusal.Error to refuse it with the offending
	// field's path. Do not connect here: a system of record that is down is
	// reported by the captures, not by Configure.
	Configure(ctx context.Context, req ConfigureRequest) error
	// TestConnection is a preflight. It may read and must never write. An
	// unreachable system of record is TestResult.Reachable == false, not an
	// error; return an error only for a fault in the adapter itself, or a
	// *refusal.Error when req.Params cannot be bound into the read.
	TestConnection(ctx context.Context, req TestRequest) (TestResult, error)
	// CaptureBefore reads the baseline before the automation acts. A
	// *refusal.Error means req.Params cannot be bound into the read (missing,
	// or a value that would reshape it); nothing was read.
	CaptureBefore(ctx context.Context, req CaptureRequest) (Capture, error)
	// CaptureAfter reads the system of record after the automation acted.
	// It is called repeatedly while the daemon waits for settlement, so it
	// must read afresh every time (no caching).
	CaptureAfter(ctx context.Context, req CaptureRequest) (Capture, error)
}

// VerdictHook is optionally implemented by an Adapter that wants to see the
// daemon's verdict and possibly demote it (e.g. a surface that knows a
// confirmation page can be cached). A demotion can never promote: the daemon
// ignores anything stronger than its own verdict.
type VerdictHook interface {
	Verdict(ctx context.Context, req VerdictRequest) (Demotion, error)
}

// ParamChecker is optionally implemented by an Adapter whose section has
// {param} references: CheckParams binds params exactly as a call would,
// without reading, and returns the *refusal.Error that call would. The SDK
// runs it first thing in every baseline capture (CaptureBefore, in the
// adapter's process: no round trip of its own), so a missing or refused
// run parameter refuses the session at Begin with its path before anything
// is read; the daemon asks it directly for a candidate it does not read.
type ParamChecker interface {
	CheckParams(ctx context.Context, params map[string]string) error
}

// Tier is the independence of an adapter's reading mechanism from the surface
// the automation acted on. Lower is stronger. It comes from the mechanism,
// never from configuration.
type Tier int

const (
	// TierIndependentSystem reads the system of record through its own API,
	// database, files or mail (rest, sql, sftp, email, ...).
	TierIndependentSystem Tier = 1
	// TierIndependentSession reads through a separate signed-in, read-only
	// session of the application.
	TierIndependentSession Tier = 2
	// TierReacquiredState re-opens the record by another path on screen.
	TierReacquiredState Tier = 3
	// TierScreenConsistency reads back the same surface the automation used.
	TierScreenConsistency Tier = 4
)

// Valid reports whether t is one of the four tiers.
func (t Tier) Valid() bool { return t >= TierIndependentSystem && t <= TierScreenConsistency }

// Info describes an adapter.
type Info struct {
	// Kind is the name a deployment's `kind:` uses, e.g. "csv-ledger".
	Kind string
	// Tier of the adapter's mechanism.
	Tier Tier
	// NeedsBaseline is true when the adapter can only be judged with a
	// baseline captured before the action.
	NeedsBaseline bool
	// AbsenceNotProof is true when the adapter's surface can hide records (a
	// record page, a screen): not finding a record there does not prove it
	// was not written, so the daemon never halts a step on its "refuted".
	AbsenceNotProof bool
	// Description is one line for operators.
	Description string
	// MaxConcurrentCaptures bounds how many captures the daemon has in
	// flight to one plugin process at once; 0 means the daemon's default.
	MaxConcurrentCaptures int
}

// ConfigureRequest carries the deployment's section for one adapter. A
// test builds one as the daemon would with adaptertest.Deployment.
type ConfigureRequest struct {
	// Kind is the kind the deployment section names.
	Kind string
	// Config is the adapter's section as a JSON object: kind, options
	// with option_params bound, and the other keys the operator wrote;
	// the daemon's own keys removed (Section, sdk/unstable/deployment).
	Config json.RawMessage
	// Secrets maps each secret slot to its resolved value, keyed as the
	// daemon sends it; read one with Secret, which names the slot as the
	// section declares it. Never log them.
	Secrets map[string]string
	// EffectTimeout bounds one effect's settlement window.
	EffectTimeout time.Duration
	// APIVersion is the version the daemon picked.
	APIVersion string
}

// DecodeConfig unmarshals Config into v, a pointer, with the SDK's strict
// decoder, the one Define uses: a misspelt option is refused with its path,
// the kind, and the keys allowed there, instead of being ignored; a section
// whose `kind` names another adapter is refused at kind. Numbers decode as
// json.Number where v holds any, so their text stays exact. An empty Config
// leaves v as it is.
func (r ConfigureRequest) DecodeConfig(v any) error {
	return decodeConfig(r.Kind, r.Config, v)
}

// TestRequest is a preflight for one session's run parameters.
type TestRequest struct {
	// Params are the session's bound run parameters, for {param}
	// references in the section.
	Params map[string]string
}

// TestResult is the answer of a preflight.
type TestResult struct {
	// Reachable is true when the system of record answered with the
	// configured credentials.
	Reachable bool
	// Message says what was tried and what happened, without secrets.
	Message string
	// Warnings are things that work but will hurt later.
	Warnings []string
	// Latency is the round-trip time of the probe.
	Latency time.Duration
}

// CaptureRequest says what to read for one effect.
type CaptureRequest struct {
	// CaptureID is unique per call, for log correlation.
	CaptureID string
	// EffectIndex is the effect's position in the step.
	EffectIndex int
	// Selector is the contract's `match` with parameters bound. An adapter
	// may use it to narrow its read; the daemon's judge filters again.
	Selector map[string]string
	// IdentityField names the field that identifies a record.
	IdentityField string
	// Timeout is the deadline for this capture; ctx carries it too.
	Timeout time.Duration
	// ContractHash is the bound contract's hash, for audit logs.
	ContractHash string
	// EffectKind is record_written, field_equals or exact_new_set.
	EffectKind string
	// ReadFields are the record fields the contracts judged on this read
	// look at: their match fields, a field_equals field, an idempotency
	// key's key_field, the identity field of a contract that tells new
	// records from existing ones, the fields of exact_new_set's
	// new_records and the candidate's freshness field (for a census read,
	// only the identity fields it keeps). An adapter may relax, for a
	// field not listed, a check that protects only that field's value (a
	// display that may have shortened it, a date that does not parse);
	// every other check stays. Empty when the daemon does not send the
	// list (an older daemon): treat every field as read.
	ReadFields []string
	// ExpectedValues are, by field name, the distinct values the contracts
	// judged on this read compare that field with, every {param} bound:
	// the match values of every contract (Selector carries them only when
	// one contract is read), a field_equals value, an idempotency key and
	// exact_new_set's new_records. An adapter that normalises what it
	// reads (whitespace, case, a date's display format) may report a value
	// read in the one spelling listed here that normalises to the same
	// text, so that the contract and the read are normalised alike; never
	// a value that normalises differently. Empty when the daemon does not
	// send them (an older daemon).
	ExpectedValues map[string][]string
	// Params are the session's bound run parameters, for {param}
	// references in the section. Bind them into this read only.
	Params map[string]string
}

// Record is one flat record as a JSON object. Values are strings, numbers
// (json.Number keeps the exact text; int64 and float64 are accepted when
// sending), booleans, nil, or nested values that the judge compares as
// compact JSON.
type Record map[string]any

// RecordSource yields the records of a capture one at a time, so an adapter
// reading a million rows never holds them all. Yield a non-nil error to abort
// the capture: the daemon then discards every record of it.
type RecordSource = iter.Seq2[Record, error]

// Capture is one read of the system of record. An unreachable system of
// record (down, credentials refused, timed out) is Reachable == false with a
// Reason, not an error; its Records are ignored.
type Capture struct {
	Reachable bool
	Reason    string
	// Code, on an unreachable capture, says the system of record answered
	// but the read is not whole (CodeReadMayBeTruncated,
	// CodeReadIncomplete), or rejected the reader's credential
	// (CodeAccessRejected); the daemon judges such a read INDETERMINATE
	// with this reason code. "" when it could not be read at all.
	Code string
	// At is when the read was taken; the zero time means "now".
	At time.Time
	// Records may be nil when there are none.
	Records RecordSource
}

// Records returns a RecordSource over a slice, for adapters whose reads are
// small.
func Records(rs ...Record) RecordSource {
	return func(yield func(Record, error) bool) {
		for _, r := range rs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Reason codes of a capture that answered but is not whole (Capture.Code).
const (
	// CodeReadMayBeTruncated: the read holds as many records as the most
	// the system of record is declared to answer at once (max_records), so
	// it may have cut the list short.
	CodeReadMayBeTruncated = "READ_MAY_BE_TRUNCATED"
	// CodeReadIncomplete: the read does not hold every record it should
	// (fewer or more than the total the system of record declares, or more
	// pages than the read may follow).
	CodeReadIncomplete = "READ_INCOMPLETE"
	// CodeAccessRejected: the system of record rejected the reader's
	// credential (a refused sign-in, not a timeout or an outage), so
	// reading again within the settlement window would only try it again
	// and may lock the account. The daemon stops reading for the effect at
	// once and judges it INDETERMINATE (class unavailable, a
	// RESTORE_ACCESS task). A daemon that does not know the code judges it
	// INDETERMINATE with this code and keeps polling.
	CodeAccessRejected = "ACCESS_REJECTED"
)

// Incomplete is the Capture of a read that answered but is not whole:
// unreachable, with code (CodeReadMayBeTruncated or CodeReadIncomplete).
func Incomplete(code, format string, args ...any) Capture {
	return Capture{Reason: fmt.Sprintf(format, args...), Code: code, At: time.Now()}
}

// Unreachable is a Capture of a system of record that could not be read.
func Unreachable(format string, args ...any) Capture {
	return Capture{Reason: fmt.Sprintf(format, args...), At: time.Now()}
}

// Verdict is the daemon's judgement of one effect.
type Verdict string

const (
	VerdictConfirmed     Verdict = "CONFIRMED"
	VerdictRefuted       Verdict = "REFUTED"
	VerdictIndeterminate Verdict = "INDETERMINATE"
)

// Reason is one machine-readable reason with a human message.
type Reason struct {
	Code    string
	Message string
}

// VerdictRequest reports the daemon's verdict on one effect to the adapter's
// VerdictHook.
type VerdictRequest struct {
	// CaptureID is the CaptureAfter call that was judged.
	CaptureID    string
	EffectIndex  int
	ContractHash string
	Verdict      Verdict
	Reasons      []Reason
	// ObservedCount and ExpectedCount are nil on INDETERMINATE.
	ObservedCount *int64
	ExpectedCount *int64
	Tier          Tier
	// Params are the session's bound run parameters.
	Params map[string]string
}

// Demotion lowers a verdict. The zero Demotion leaves the verdict as it is.
type Demotion struct {
	Verdict    Verdict
	ReasonCode string
	Message    string
}

// IsZero reports whether d demotes nothing.
func (d Demotion) IsZero() bool { return d.Verdict == "" }

type loggerKey struct{}

// WithLogger returns ctx carrying l. The SDK's server (sdk/plugin) does
// this for every call so that adapters log through Logger(ctx); tests may
// too.
func WithLogger(ctx context.Context, l hclog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the logger the SDK put in ctx, or a logger that discards
// everything.
func Logger(ctx context.Context) hclog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(hclog.Logger); ok {
		return l
	}
	return hclog.NewNullLogger()
}

package sdk

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/sdk/internal/sdkapi"
	"github.com/verifierd/verifierd/sdk/plugin"
)

// APIVersion is the in-band adapter API version this SDK speaks; an adapter
// lists it in GetInfo and the daemon picks a version both speak.
const APIVersion = sdkapi.APIVersion

// Adapter reads one kind of system of record for the daemon:
//
//	Info() Info
//	Configure(ctx context.Context, req ConfigureRequest) error
//	TestConnection(ctx context.Context) (TestResult, error)
//	CaptureBefore(ctx context.Context, req CaptureRequest) (Capture, error)
//	CaptureAfter(ctx context.Context, req CaptureRequest) (Capture, error)
//
// The daemon calls Info, Configure once and Info again (a tier may depend on
// the configuration: the daemon keeps the weaker answer), then
// TestConnection and the captures any number of times, possibly
// concurrently. Configure refuses
// with a *ConfigError. An unreachable system of record is data
// (Capture.Reachable == false, TestResult.Reachable == false), never an
// error; return errors only for faults in the adapter itself. CaptureAfter
// is called repeatedly while the daemon waits for settlement and must read
// afresh each time.
type Adapter = sdkapi.Adapter

// VerdictHook is optionally implemented by an Adapter to see the daemon's
// verdict on each effect and demote it with a reason:
//
//	Verdict(ctx context.Context, req VerdictRequest) (Demotion, error)
//
// It can never promote: the daemon ignores a "demotion" to CONFIRMED or to
// anything stronger than its own verdict.
type VerdictHook = sdkapi.VerdictHook

// Info describes an adapter: Kind (the deployment's `kind:`), Tier,
// NeedsBaseline, AbsenceNotProof (the surface can hide records) and a
// one-line Description.
type Info = sdkapi.Info

// Tier is the independence of an adapter's reading mechanism, 1 (strongest)
// to 4. It comes from the mechanism, never from configuration.
type Tier = sdkapi.Tier

// The four tiers.
const (
	TierIndependentSystem  = sdkapi.TierIndependentSystem
	TierIndependentSession = sdkapi.TierIndependentSession
	TierReacquiredState    = sdkapi.TierReacquiredState
	TierScreenConsistency  = sdkapi.TierScreenConsistency
)

// ConfigureRequest carries the adapter's deployment section as JSON (Config,
// secrets removed; decode it with DecodeConfig), the run's Params, the
// resolved Secrets (slot -> value; never log them), the EffectTimeout and
// the negotiated APIVersion.
type ConfigureRequest = sdkapi.ConfigureRequest

// DecodeConfig unmarshals an adapter's section (raw JSON) into v, a pointer,
// with exact numbers. A key that v's structs have no field for is refused
// with a *ConfigError naming its dotted path and the keys allowed there, at
// any depth; `kind` is always allowed at the top. ConfigureRequest's
// DecodeConfig method does the same and names the kind in the refusal.
func DecodeConfig(raw json.RawMessage, v any) error { return sdkapi.DecodeConfig("", raw, v) }

// RefuseUnknownKeys refuses the first key of section, in sorted order, that
// is not in allowed, with DecodeConfig's message: the key's dotted path, the
// kind, and the keys allowed there. path is the section's own path ("" at
// the top, where `kind` is always allowed). For adapters that read their
// section key by key instead of into a struct.
func RefuseUnknownKeys[V any](kind, path string, section map[string]V, allowed []string) error {
	return sdkapi.RefuseUnknownKeys(kind, path, section, allowed)
}

// ConfigError refuses a configuration: Path names the field inside the
// adapter's section, Message says what is wrong and what to write instead.
type ConfigError = sdkapi.ConfigError

// TestResult is a preflight's answer: Reachable, Message, Warnings, Latency.
type TestResult = sdkapi.TestResult

// CaptureRequest says what to read for one effect: the bound Selector, the
// IdentityField, the Timeout (also on ctx), and CaptureID, EffectIndex,
// ContractHash, EffectKind for logs.
type CaptureRequest = sdkapi.CaptureRequest

// Record is one flat record as a JSON object. Numbers may be json.Number
// (exact text), int64 or float64.
type Record = sdkapi.Record

// RecordSource yields a capture's records one at a time, so a large read is
// never held whole. Yield a non-nil error to abort the capture.
type RecordSource = sdkapi.RecordSource

// Capture is one read: Reachable, Reason (when not), At (zero means now) and
// Records, a slice (Records(...)) or any streaming RecordSource.
type Capture = sdkapi.Capture

// Verdict is the daemon's judgement of one effect.
type Verdict = sdkapi.Verdict

// The verdicts.
const (
	VerdictConfirmed     = sdkapi.VerdictConfirmed
	VerdictRefuted       = sdkapi.VerdictRefuted
	VerdictIndeterminate = sdkapi.VerdictIndeterminate
)

// Reason is a machine-readable code with a human message.
type Reason = sdkapi.Reason

// VerdictRequest is the daemon's verdict on one effect, for a VerdictHook.
type VerdictRequest = sdkapi.VerdictRequest

// Demotion lowers a verdict; the zero Demotion leaves it as it is.
type Demotion = sdkapi.Demotion

// Records returns a RecordSource over a slice.
func Records(rs ...Record) RecordSource { return sdkapi.Records(rs...) }

// Unreachable is a Capture of a system of record that could not be read,
// taken now.
func Unreachable(format string, args ...any) Capture {
	return sdkapi.Unreachable(format, args...)
}

// Logger returns the logger for the current call: hclog JSON on the plugin's
// stderr, which the daemon relays into its own log as adapter.<kind>.
func Logger(ctx context.Context) hclog.Logger { return sdkapi.Logger(ctx) }

// Serve runs the adapter that factory builds as a verifierd plugin and
// returns when the daemon stops it. A plugin's main is:
//
//	func main() { sdk.Serve(func() sdk.Adapter { return myadapter.New() }) }
//
// Nothing but the go-plugin handshake ever reaches the real stdout (stray
// prints go to stderr), logs are hclog JSON on stderr, a panic in any call
// answers codes.Internal instead of killing the process, and the plugin
// exits by itself when the daemon that started it dies.
func Serve(factory func() Adapter) { plugin.Serve(factory) }

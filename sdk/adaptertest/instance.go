package adaptertest

import (
	"context"
	"iter"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// Stream is one capture in flight, as the daemon's client receives it: the
// header (Reachable, Reason, Code, At) has arrived, the records follow
// through Records, Batches or RawBatches, and any error while reading them
// means the read is incomplete. Consume it exactly once, or Close it.
type Stream struct {
	Reachable bool
	Reason    string
	// Code is the unreachable read's reason code (sdk.Capture.Code).
	Code string
	At   time.Time

	s *host.Stream
}

// stream is the daemon client's capture as a Stream (nil with the error
// when the call failed).
func stream(s *host.Stream, err error) (*Stream, error) {
	if s == nil {
		return nil, err
	}
	return &Stream{Reachable: s.Reachable, Reason: s.Reason, Code: s.Code, At: s.At, s: s}, err
}

// Records reads every record of the capture.
func (c *Stream) Records() ([]sdk.Record, error) { return c.s.Records() }

// Batches yields the capture's records batch by batch, decoded.
func (c *Stream) Batches() iter.Seq2[[]sdk.Record, error] { return c.s.Batches() }

// RawBatches yields the capture's records batch by batch, each record the
// JSON object the adapter sent.
func (c *Stream) RawBatches() iter.Seq2[[][]byte, error] { return c.s.RawBatches() }

// Close ends the capture without reading the rest.
func (c *Stream) Close() { c.s.Close() }

// Info is what an adapter says of itself (sdk.Info) and the in-band API
// versions its SDK speaks, newest first.
type Info struct {
	sdk.Info
	APIVersions []string
}

// Instance is one configured adapter instance behind the real plugin
// client, as the daemon holds it: every call names the instance and carries
// Params, the session's run parameters. Its methods have the daemon's
// per-session shape, so a package's own tests read like the daemon's calls.
type Instance struct {
	// process is the plugin process (or in-process server) serving the
	// instance; it can configure more instances.
	process host.Client
	// ID is the instance id Configure returned ("" before Configure).
	ID string
	// Params are the run parameters every call carries; a request that
	// sets its own Params keeps them.
	Params map[string]string

	crash func()
	stop  func()
	pid   int
}

// Subprocess starts the adapter binary as a plugin process exactly as the
// daemon does (go-plugin's handshake, AutoMTLS, gRPC only, an environment
// of exactly env, nothing inherited) and returns an unconfigured Instance.
// The process is killed when t ends; the adapter's log (its stderr) is
// shown when t failed.
func Subprocess(t testing.TB, binary string, env ...string) *Instance {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(binary)
	cmd.Env = env
	logger := hclog.New(&hclog.LoggerOptions{Name: "adapter", Output: logs, Level: hclog.Debug})
	sp, err := host.Start(host.ClientConfig(cmd, logger))
	if err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	t.Cleanup(func() {
		sp.Kill()
		if t.Failed() {
			t.Logf("adapter log:\n%s", logs.String())
		}
	})
	pid := sp.Pid()
	return &Instance{process: sp, pid: pid, stop: sp.Kill, crash: func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}}
}

// InProcess serves factory's adapter in process, over the same server,
// converters and bounds as a plugin binary, and returns an unconfigured
// Instance; the server stops when t ends.
func InProcess(t testing.TB, factory func() sdk.Adapter) *Instance {
	t.Helper()
	ip, err := host.NewInProcess(factory, nil)
	if err != nil {
		t.Fatalf("starting the adapter in process: %v", err)
	}
	t.Cleanup(func() { ip.Close() })
	return &Instance{process: ip, crash: ip.Crash, stop: func() { ip.Close() }}
}

// Configured is InProcess followed by Setup with req and params; a refusal
// fails t.
func Configured(t testing.TB, factory func() sdk.Adapter, req sdk.ConfigureRequest, params map[string]string) *Instance {
	t.Helper()
	in := InProcess(t, factory)
	if err := in.Setup(t.Context(), req, params); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return in
}

// Configure configures a new instance in the process and makes it this
// Instance's. A refusal is a *refusal.Error.
func (in *Instance) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	id, err := in.process.Configure(ctx, req)
	if err != nil {
		return err
	}
	in.ID = id
	return nil
}

// Setup configures a new instance with req and makes params its run
// parameters, then checks that they bind (CheckParams, which reads
// nothing): the refusal a daemon would give at Begin, from Configure or
// from the parameters, is a *refusal.Error.
func (in *Instance) Setup(ctx context.Context, req sdk.ConfigureRequest, params map[string]string) error {
	if err := in.Configure(ctx, req); err != nil {
		return err
	}
	in.Params = params
	return in.process.CheckParams(ctx, in.ID, params)
}

// GetInfo describes the configured instance (the adapter before Configure).
func (in *Instance) GetInfo(ctx context.Context) (Info, error) {
	info, err := in.process.GetInfo(ctx, in.ID)
	return Info{Info: info.Info, APIVersions: info.APIVersions}, err
}

// TestConnection runs the preflight with Params.
func (in *Instance) TestConnection(ctx context.Context) (sdk.TestResult, error) {
	return in.process.TestConnection(ctx, in.ID, sdk.TestRequest{Params: in.Params})
}

// CaptureBefore starts a baseline read with Params.
func (in *Instance) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (*Stream, error) {
	return stream(in.process.CaptureBefore(ctx, in.ID, in.bind(req)))
}

// CaptureAfter starts an after read with Params.
func (in *Instance) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (*Stream, error) {
	return stream(in.process.CaptureAfter(ctx, in.ID, in.bind(req)))
}

// Verdict calls the verdict hook with Params.
func (in *Instance) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	if req.Params == nil {
		req.Params = in.Params
	}
	return in.process.Verdict(ctx, in.ID, req)
}

// Release drops the instance from its process.
func (in *Instance) Release(ctx context.Context) error {
	return in.process.Release(ctx, in.ID)
}

// Crash kills the plugin process (Subprocess) or cuts the in-process server
// off (InProcess) abruptly, as an adapter dying mid-call would.
func (in *Instance) Crash() {
	if in.crash != nil {
		in.crash()
	}
}

// Stop stops the plugin process the way the daemon stops one (a graceful
// shutdown, then a kill; Subprocess) or closes the in-process server
// (InProcess), unlike Crash's abrupt death.
func (in *Instance) Stop() {
	if in.stop != nil {
		in.stop()
	}
}

// Pid is the plugin process id of a Subprocess instance; 0 in process.
func (in *Instance) Pid() int { return in.pid }

func (in *Instance) bind(req sdk.CaptureRequest) sdk.CaptureRequest {
	if req.Params == nil {
		req.Params = in.Params
	}
	return req
}

// Request is a capture request for selector with the kit's defaults: a
// capture id, identity field "id", a minute's timeout, record_written.
func Request(selector map[string]string) sdk.CaptureRequest {
	return sdk.CaptureRequest{
		CaptureID:     "adaptertest",
		Selector:      selector,
		IdentityField: "id",
		Timeout:       time.Minute,
		EffectKind:    "record_written",
	}
}

// ReadAll runs one capture (CaptureAfter when after, else CaptureBefore)
// and reads it whole; an error from the call or the stream fails t.
func ReadAll(t testing.TB, in *Instance, after bool, req sdk.CaptureRequest) (*Stream, []sdk.Record) {
	t.Helper()
	ctx := t.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	call, which := in.CaptureBefore, "CaptureBefore"
	if after {
		call, which = in.CaptureAfter, "CaptureAfter"
	}
	capt, err := call(ctx, req)
	if err != nil {
		t.Fatalf("%s returned an error: %v", which, err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("%s: reading the records: %v", which, err)
	}
	return capt, recs
}

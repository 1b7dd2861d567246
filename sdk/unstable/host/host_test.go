package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// testPlugin is the path of sdk/internal/testplugin, built once by TestMain.
var testPlugin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sdk-plugin-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testPlugin = filepath.Join(dir, "testplugin")
	build := exec.Command("go", "build", "-o", testPlugin, "github.com/verifierd/verifierd/sdk/internal/testplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for the plugin's log goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instance is one configured instance behind the daemon's client, with the
// daemon's per-session call shape (adaptertest.Instance's, over host.Client).
type instance struct {
	host.Client
	ID string
}

func (in *instance) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	id, err := in.Client.Configure(ctx, req)
	if err == nil {
		in.ID = id
	}
	return err
}

func (in *instance) GetInfo(ctx context.Context) (host.AdapterInfo, error) {
	return in.Client.GetInfo(ctx, in.ID)
}

func (in *instance) TestConnection(ctx context.Context) (sdk.TestResult, error) {
	return in.Client.TestConnection(ctx, in.ID, sdk.TestRequest{})
}

func (in *instance) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	return in.Client.CaptureBefore(ctx, in.ID, req)
}

func (in *instance) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	return in.Client.CaptureAfter(ctx, in.ID, req)
}

func (in *instance) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	return in.Client.Verdict(ctx, in.ID, req)
}

type started struct {
	*instance
	sp     *host.Subprocess
	stderr *syncBuffer // raw plugin stderr
	log    *syncBuffer // the daemon-side logger
}

func start(t testing.TB, config string, env ...string) started {
	t.Helper()
	cmd := exec.Command(testPlugin)
	cmd.Env = env
	s := started{stderr: &syncBuffer{}, log: &syncBuffer{}}
	logger := hclog.New(&hclog.LoggerOptions{Name: "adapter.testplugin", Output: s.log, Level: hclog.Trace})
	cfg := host.ClientConfig(cmd, logger)
	cfg.Stderr = s.stderr
	sp, err := host.Start(cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(sp.Kill)
	s.sp = sp
	s.instance = &instance{Client: sp}
	if config != "" {
		if err := s.Configure(context.Background(), sdk.ConfigureRequest{Kind: "testplugin", Config: json.RawMessage(config)}); err != nil {
			t.Fatalf("configure: %v", err)
		}
	}
	return s
}

func synthetic(mode string, extra ...string) sdk.CaptureRequest {
	sel := map[string]string{"mode": mode}
	for i := 0; i+1 < len(extra); i += 2 {
		sel[extra[i]] = extra[i+1]
	}
	return sdk.CaptureRequest{CaptureID: "c1", Selector: sel, IdentityField: "id", Timeout: 30 * time.Second}
}

func TestInfoConfigureAndTestConnection(t *testing.T) {
	t.Parallel()
	p := start(t, "")
	ctx := t.Context()

	info, err := p.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := host.AdapterInfo{
		Info:        sdk.Info{Kind: "testplugin", Tier: sdk.TierIndependentSystem, NeedsBaseline: true, Description: "SDK test adapter"},
		APIVersions: []string{"v2"},
	}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("GetInfo (-want +got):\n%s", diff)
	}
	if v, err := host.NegotiateAPIVersion(info.APIVersions); err != nil || v != sdk.APIVersion {
		t.Errorf("NegotiateAPIVersion = %q, %v; want %q", v, err, sdk.APIVersion)
	}

	err = p.Configure(ctx, sdk.ConfigureRequest{Config: json.RawMessage(`{"mode":"carrier-pigeon"}`)})
	var ce *refusal.Error
	if !errors.As(err, &ce) || ce.Path != "mode" {
		t.Fatalf("Configure with a bad mode = %v; want a *refusal.Error at path mode", err)
	}
	err = p.Configure(ctx, sdk.ConfigureRequest{Config: json.RawMessage(`{"mode":"synthetic","colour":"red"}`)})
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "colour") {
		t.Fatalf("Configure with an unknown key = %v; want a refusal naming it", err)
	}
	if err := p.Configure(ctx, sdk.ConfigureRequest{Config: json.RawMessage(`{"mode":"synthetic"}`)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	res, err := p.TestConnection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sdk.TestResult{Reachable: true, Message: "synthetic", Latency: time.Millisecond}, res); diff != "" {
		t.Errorf("TestConnection (-want +got):\n%s", diff)
	}
}

// 100,000 records cross the process boundary in bounded batches, numbers
// intact.
func TestCaptureStreamsInBatches(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`)
	const n = 100_000
	c, err := p.CaptureAfter(t.Context(), synthetic("many", "count", strconv.Itoa(n)))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Reachable || !c.At.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("header = reachable %v at %v", c.Reachable, c.At)
	}
	var total, batches int
	var last sdk.Record
	for batch, err := range c.Batches() {
		if err != nil {
			t.Fatalf("after %d records: %v", total, err)
		}
		batches++
		if len(batch) > host.MaxBatchRecords {
			t.Fatalf("batch of %d records, over %d", len(batch), host.MaxBatchRecords)
		}
		total += len(batch)
		last = batch[len(batch)-1]
	}
	if total != n {
		t.Fatalf("got %d records, want %d", total, n)
	}
	if batches < n/host.MaxBatchRecords {
		t.Errorf("got %d batches; a read set must not travel in a few huge messages", batches)
	}
	want := sdk.Record{"id": json.Number("99999"), "exact": json.Number("12345678901234567890.5"), "name": "row 99999"}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last record (-want +got):\n%s", diff)
	}
}

func TestPanicAnswersInternalAndPluginSurvives(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic","panic_in":"test_connection"}`)
	ctx := t.Context()

	_, err := p.TestConnection(ctx)
	if status.Code(err) != codes.Internal || !errors.Is(err, host.ErrAdapterFailed) {
		t.Fatalf("TestConnection panic: err = %v (code %v); want codes.Internal wrapping ErrAdapterFailed", err, status.Code(err))
	}

	c, err := p.CaptureAfter(ctx, synthetic("panic"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Records()
	if status.Code(err) != codes.Internal || recs != nil {
		t.Fatalf("panic mid-stream: %d records, err %v; want no records and codes.Internal", len(recs), err)
	}

	_, err = p.CaptureBefore(ctx, synthetic("panic-now"))
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic before the header: err = %v; want codes.Internal", err)
	}

	// Still serving.
	c, err = p.CaptureAfter(ctx, synthetic("many", "count", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := c.Records(); err != nil || len(recs) != 3 {
		t.Fatalf("after the panics: %d records, %v", len(recs), err)
	}
	if !strings.Contains(p.log.String(), "boom in the record stream") {
		t.Errorf("the panic was not logged:\n%s", p.log.String())
	}
}

func TestUnreachableAndAdapterErrors(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`)
	ctx := t.Context()

	c, err := p.CaptureBefore(ctx, synthetic("unreachable"))
	if err != nil {
		t.Fatalf("an unreachable system of record is data, not an error: %v", err)
	}
	if c.Reachable || c.Reason != "synthetic outage" || c.Code != "" || c.At.IsZero() {
		t.Fatalf("capture = %+v; want unreachable with its reason and a time", c)
	}

	// A read that answered but is not whole carries its code across the
	// wire, beside its reason.
	c, err = p.CaptureAfter(ctx, synthetic("truncated"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Reachable || c.Code != sdk.CodeReadMayBeTruncated || c.Reason != "100 records, max_records 100" {
		t.Fatalf("capture = %+v; want unreachable with code %s and its reason", c, sdk.CodeReadMayBeTruncated)
	}
	c.Close()
	if recs, err := c.Records(); err != nil || len(recs) != 0 {
		t.Fatalf("unreachable capture records = %v, %v; want none", recs, err)
	}

	if _, err := p.CaptureAfter(ctx, synthetic("error")); !errors.Is(err, host.ErrAdapterFailed) {
		t.Fatalf("adapter error = %v; want ErrAdapterFailed", err)
	}

	c, err = p.CaptureAfter(ctx, synthetic("stream-error"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Records()
	if !errors.Is(err, host.ErrAdapterFailed) || !strings.Contains(err.Error(), "cursor lost") || recs != nil {
		t.Fatalf("stream error: records %v, err %v; want no records and the adapter's error", recs, err)
	}
}

func TestVerdictHook(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`)
	one := int64(1)
	req := sdk.VerdictRequest{Verdict: sdk.VerdictConfirmed, Tier: 2, ObservedCount: &one, ExpectedCount: &one,
		Reasons: []sdk.Reason{{Code: "COUNT_EXACT", Message: "1 of 1"}}}
	d, err := p.Verdict(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Demotion{Verdict: sdk.VerdictIndeterminate, ReasonCode: "TEST_DEMOTION", Message: "tier too weak"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("demotion (-want +got):\n%s", diff)
	}
	req.Tier = 1
	if d, err := p.Verdict(t.Context(), req); err != nil || !d.IsZero() {
		t.Errorf("tier 1: demotion %+v, %v; want none", d, err)
	}
}

// Killing the plugin in the middle of a capture must surface as
// ErrPluginShutdown, never as a shorter read set that ends cleanly.
func TestKillMidCaptureIsShutdown(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`)
	c, err := p.CaptureAfter(t.Context(), synthetic("endless"))
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var final error
	for batch, err := range c.RawBatches() {
		if err != nil {
			final = err
			break
		}
		if got == 0 {
			if err := syscall.Kill(p.sp.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		got += len(batch)
	}
	if !errors.Is(final, host.ErrPluginShutdown) {
		t.Fatalf("after %d records the stream ended with %v; want ErrPluginShutdown", got, final)
	}
	if _, err := p.TestConnection(t.Context()); !errors.Is(err, host.ErrPluginShutdown) {
		t.Fatalf("call to a dead plugin = %v; want ErrPluginShutdown", err)
	}
}

// Stray prints, before or after the handshake and at the Go or the file
// descriptor level, never reach the protocol stream.
func TestStdoutGuard(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`, "TESTPLUGIN_PRINT=1")
	c, err := p.CaptureAfter(t.Context(), synthetic("print"))
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := c.Records(); err != nil || len(recs) != 1 {
		t.Fatalf("records = %v, %v", recs, err)
	}
	eventually(t, func() bool {
		return strings.Contains(p.stderr.String(), "stray-before-handshake") && strings.Contains(p.stderr.String(), "stray-fd1-after")
	}, "plugin stderr to carry the stray stdout lines:\n"+p.stderr.String())
	eventually(t, func() bool { return strings.Contains(p.log.String(), "stray-fmt-after") },
		"the daemon log to carry the stray fmt.Println:\n"+p.log.String())
}

// The plugin inherits nothing from the daemon's environment: only what the
// daemon put in cmd.Env, plus go-plugin's own handshake variables.
func TestPluginEnvironmentIsEmpty(t *testing.T) {
	t.Setenv("VERIFIERD_TEST_DAEMON_SECRET", "must-not-leak")
	p := start(t, `{"mode":"synthetic"}`, "ONLY_THIS=1")
	c, err := p.CaptureAfter(t.Context(), synthetic("env"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		name := r["name"].(string)
		names = append(names, name)
		if name != "ONLY_THIS" && name != host.Handshake.MagicCookieKey && !strings.HasPrefix(name, "PLUGIN_") {
			t.Errorf("the plugin inherited %s", name)
		}
	}
	if !slices.Contains(names, "ONLY_THIS") {
		t.Errorf("the plugin's environment %v lacks the variable the daemon gave it", names)
	}
	// go-plugin hands the client's certificate over only under AutoMTLS.
	if !slices.Contains(names, "PLUGIN_CLIENT_CERT") {
		t.Errorf("the plugin got no client certificate: the connection is not mutual TLS (%v)", names)
	}
	cfg := host.ClientConfig(exec.Command(testPlugin), nil)
	if !cfg.AutoMTLS || !cfg.SkipHostEnv || len(cfg.AllowedProtocols) != 1 {
		t.Errorf("ClientConfig: AutoMTLS %v, SkipHostEnv %v, protocols %v; want mTLS, no host env, gRPC only", cfg.AutoMTLS, cfg.SkipHostEnv, cfg.AllowedProtocols)
	}
}

func TestLogsAreJSONOnStderr(t *testing.T) {
	t.Parallel()
	p := start(t, `{"mode":"synthetic"}`)
	eventually(t, func() bool { return strings.Contains(p.stderr.String(), `"@message":"configured"`) },
		"an hclog JSON line for Configure on stderr:\n"+p.stderr.String())
}

func TestRunByHandIsRefused(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(testPlugin)
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("run without the handshake cookie: %v; want exit 1", err)
	}
	if !strings.Contains(stderr.String(), "this binary is a verifierd adapter plugin") {
		t.Errorf("stderr = %q", stderr.String())
	}
	// A person who runs the binary by hand sees only the explanation.
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q; want nothing", stdout.String())
	}
}

// A plugin whose daemon dies without stopping it exits by itself.
func TestParentDeathWatchdog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// sh starts the plugin (with the cookie, so it serves), records its pid
	// and exits shortly after: the plugin is orphaned.
	script := fmt.Sprintf("%s=%s %q >/dev/null 2>&1 & echo $! > %q; sleep 1",
		host.Handshake.MagicCookieKey, host.Handshake.MagicCookieValue, testPlugin, pidFile)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	eventually(t, func() bool { return !alive(pid) }, fmt.Sprintf("orphaned plugin %d to exit", pid))
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) STATE ..."; comm may hold spaces, so look after the ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func eventually(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestInProcessCrashIsShutdown(t *testing.T) {
	t.Parallel()
	p := adaptertest.Configured(t, func() sdk.Adapter { return endless{} }, sdk.ConfigureRequest{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := p.CaptureAfter(ctx, sdk.CaptureRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var final error
	n := 0
	for _, err := range c.RawBatches() {
		if err != nil {
			final = err
			break
		}
		if n++; n == 1 {
			p.Crash()
		}
	}
	if !errors.Is(final, host.ErrPluginShutdown) {
		t.Fatalf("stream ended with %v; want ErrPluginShutdown", final)
	}
}

// endless is an in-test adapter whose captures never end.
type endless struct{}

func (endless) Info() sdk.Info                                        { return sdk.Info{Kind: "endless", Tier: sdk.TierIndependentSystem} }
func (endless) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (endless) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (e endless) CaptureBefore(ctx context.Context, r sdk.CaptureRequest) (sdk.Capture, error) {
	return e.CaptureAfter(ctx, r)
}
func (endless) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: func(yield func(sdk.Record, error) bool) {
		for i := 0; yield(sdk.Record{"id": int64(i)}, nil); i++ {
		}
	}}, nil
}

func startB(b *testing.B) started { return start(b, `{"mode":"synthetic"}`) }

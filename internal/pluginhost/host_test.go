package pluginhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// fakeAdapter is an adapter whose Info and Configure a test sets; its
// captures return one record carrying the call's "id" run parameter, and
// it counts configures and releases in stats.
type fakeAdapter struct {
	kind  string
	tier  sdk.Tier
	max   int
	stats *stats
}

type stats struct{ configures, releases atomic.Int64 }

func (a fakeAdapter) Info() sdk.Info {
	return sdk.Info{Kind: a.kind, Tier: a.tier, MaxConcurrentCaptures: a.max}
}

func (a fakeAdapter) Configure(_ context.Context, req sdk.ConfigureRequest) error {
	if strings.Contains(string(req.Config), "refuse") {
		return &refusal.Error{Path: "refuse", Message: "refused on purpose"}
	}
	if a.stats != nil {
		a.stats.configures.Add(1)
	}
	return nil
}

func (a fakeAdapter) Close() error {
	if a.stats != nil {
		a.stats.releases.Add(1)
	}
	return nil
}

func (fakeAdapter) CheckParams(_ context.Context, params map[string]string) error {
	if params["id"] == "bad/id" {
		return &refusal.Error{Path: "options.id", Message: "a slash reshapes the read"}
	}
	return nil
}

func (fakeAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "fake"}, nil
}

func (fakeAdapter) CaptureBefore(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": req.Params["id"]})}, nil
}

func (fakeAdapter) CaptureAfter(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": req.Params["id"]})}, nil
}

// crashable is an in-process adapter that can die like a process: after
// Crash it reports Exited, and the host must relaunch it.
type crashable struct {
	*host.InProcess
	dead atomic.Bool
}

func (c *crashable) Crash()       { c.dead.Store(true); c.InProcess.Crash() }
func (c *crashable) Exited() bool { return c.dead.Load() }

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// launcher starts fake adapters and counts the launches per kind; fail
// makes the next launches fail.
type launcher struct {
	tier     sdk.Tier
	max      int // MaxConcurrentCaptures the adapters declare
	stats    stats
	reported string // kind the adapter reports; "" is the kind asked for
	mu       sync.Mutex
	launches map[string]int
	started  []*crashable
	fail     error
}

func (l *launcher) start(kind string, logger hclog.Logger) (conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.launches == nil {
		l.launches = map[string]int{}
	}
	l.launches[kind]++
	if l.fail != nil {
		return nil, l.fail
	}
	reported := l.reported
	if reported == "" {
		reported = kind
	}
	tier := l.tier
	if tier == 0 {
		tier = sdk.TierIndependentSystem
	}
	ip, err := host.NewInProcess(func() sdk.Adapter { return fakeAdapter{kind: reported, tier: tier, max: l.max, stats: &l.stats} }, logger)
	if err != nil {
		return nil, err
	}
	c := &crashable{InProcess: ip}
	l.started = append(l.started, c)
	return c, nil
}

func (l *launcher) count(kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.launches[kind]
}

// newHost is a Host whose adapters are in-process fakes started by l, on
// clk, with kinds registered as if their binaries had been found.
func newHost(t *testing.T, opts Options, l *launcher, clk *clock, kinds ...string) *Host {
	t.Helper()
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	h.now = clk.now
	h.startConn = l.start
	for _, k := range kinds {
		h.binaries[k] = "/nonexistent/" + BinaryPrefix + k
	}
	return h
}

// spec is a session's spec: one configuration of kind, run parameter id.
func spec(kind, id string) Spec {
	return Spec{Kind: kind, ConfigJSON: []byte(`{"kind":"` + kind + `"}`), Params: map[string]string{"id": id}}
}

// cfgSpec is a spec of another configuration of kind, named name.
func cfgSpec(kind, name string) Spec {
	return Spec{Kind: kind, ConfigJSON: []byte(`{"kind":"` + kind + `","name":"` + name + `"}`), Params: map[string]string{"id": name}}
}

// readID captures once through in and returns the record's id.
func readID(t *testing.T, in *Instance) string {
	t.Helper()
	c, err := in.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "t", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %v, %v", recs, err)
	}
	return recs[0]["id"].(string)
}

func TestOneProcessServesEveryConfigurationAndParameter(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	ctx := t.Context()
	a, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Instance(ctx, spec("fake", "2"))
	if err != nil {
		t.Fatal(err)
	}
	withSecret := spec("fake", "1")
	withSecret.Secrets = map[string]string{"token": "changed"}
	c, err := h.Instance(ctx, withSecret)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Instance(ctx, cfgSpec("fake", "other"))
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg != b.cfg {
		t.Error("new run parameters configured a second instance; parameters must travel with each call")
	}
	if a.cfg == c.cfg || a.cfg == d.cfg || c.cfg == d.cfg {
		t.Error("another secret or configuration shared an instance")
	}
	if got := l.count("fake"); got != 1 {
		t.Errorf("%d launches, want 1: one process per kind", got)
	}
	if got := l.stats.configures.Load(); got != 3 {
		t.Errorf("%d configures, want 3: one per configuration", got)
	}
	// Each session's own parameters reach the adapter with each call.
	if got := readID(t, a); got != "1" {
		t.Errorf("session a read %q, want its own parameter 1", got)
	}
	if got := readID(t, b); got != "2" {
		t.Errorf("session b read %q, want its own parameter 2", got)
	}
	if res, err := a.TestConnection(ctx); err != nil || !res.Reachable {
		t.Errorf("TestConnection = %+v, %v", res, err)
	}
	if a.Kind() != "fake" || a.Info().Tier != sdk.TierIndependentSystem || a.Pid() != 0 {
		t.Errorf("kind %q, info %+v, pid %d", a.Kind(), a.Info(), a.Pid())
	}
	// A parameter the adapter cannot bind refuses the session up front,
	// with its path, and leaves the shared instance in place.
	_, err = h.Instance(ctx, spec("fake", "bad/id"))
	var ce *refusal.Error
	if !errors.As(err, &ce) || ce.Path != "options.id" {
		t.Errorf("Instance with an unbindable parameter = %v; want a *refusal.Error at options.id", err)
	}
	if got := readID(t, a); got != "1" {
		t.Errorf("after a refused parameter session a read %q", got)
	}
}

func TestEvictionReleasesTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{MaxInstances: 2}, l, clk, "fake")
	ctx := t.Context()
	use := func(name string) *Instance {
		t.Helper()
		clk.advance(time.Second)
		in, err := h.Instance(ctx, cfgSpec("fake", name))
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	a := use("a")
	use("b")
	if use("a").cfg != a.cfg {
		t.Fatal("a was not reused")
	}
	use("c") // b is now the least recently used
	h.mu.Lock()
	n := len(h.instances)
	_, hasA := h.instances[cfgSpec("fake", "a").key()]
	_, hasB := h.instances[cfgSpec("fake", "b").key()]
	h.mu.Unlock()
	if n != 2 || !hasA || hasB {
		t.Errorf("after eviction: %d instances, a kept %v, b kept %v; want 2, true, false", n, hasA, hasB)
	}
	waitFor(t, "the evicted instance's Release", func() bool { return l.stats.releases.Load() == 1 })
	before := l.stats.configures.Load()
	use("b")
	if got := l.stats.configures.Load(); got != before+1 {
		t.Errorf("an evicted instance was not configured afresh: %d configures, want %d", got, before+1)
	}
	if got := l.count("fake"); got != 1 {
		t.Errorf("%d launches, want 1: eviction releases an instance, not the process", got)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCapturesAreBoundedPerProcess(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{max: 2}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	ctx := t.Context()
	a, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Instance(ctx, cfgSpec("fake", "other"))
	if err != nil {
		t.Fatal(err)
	}
	req := sdk.CaptureRequest{CaptureID: "t", Timeout: time.Minute}
	first, err := a.CaptureAfter(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.CaptureAfter(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Two captures are open on the process (of two instances): a third
	// waits for a slot, here until its context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.CaptureBefore(short, req); err == nil || !strings.Contains(err.Error(), "max_concurrent_captures 2") {
		t.Fatalf("a third concurrent capture = %v; want it to wait for a slot", err)
	}
	// Consuming a capture gives its slot back.
	if _, err := first.Records(); err != nil {
		t.Fatal(err)
	}
	third, err := a.CaptureBefore(ctx, req)
	if err != nil {
		t.Fatalf("a capture after a slot was freed: %v", err)
	}
	third.Close()
	second.Close()
	// A capture whose context ends gives its slot back too.
	gone, cancelGone := context.WithCancel(ctx)
	if _, err := a.CaptureAfter(gone, req); err != nil {
		t.Fatal(err)
	}
	cancelGone()
	waitFor(t, "the slots to free", func() bool {
		h.mu.Lock()
		p := h.procs["fake"]
		h.mu.Unlock()
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.slots) == 0
	})
}

func TestBackoffBetweenFailedLaunches(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{fail: errors.New("exec format error")}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	h.mu.Lock()
	in := h.procLocked("fake")
	h.mu.Unlock()
	ctx := t.Context()
	ensure := func(ctx context.Context) error {
		_, _, err := in.ensure(ctx)
		return err
	}

	wantDelays := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for i, want := range wantDelays {
		if err := ensure(ctx); err == nil || !strings.Contains(err.Error(), "exec format error") {
			t.Fatalf("launch %d: %v; want the launch failure", i+1, err)
		}
		if got := in.nextLaunch.Sub(clk.now()); got != want {
			t.Errorf("after failure %d the next launch waits %v, want %v", i+1, got, want)
		}
		if i < len(wantDelays)-1 {
			clk.advance(want)
		}
	}

	// Inside the backoff a caller that cannot wait gets an error and no
	// launch is tried.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if err := ensure(short); err == nil || !strings.Contains(err.Error(), "waiting to relaunch") {
		t.Errorf("ensure inside the backoff = %v; want waiting to relaunch", err)
	}
	if got := l.count("fake"); got != 3 {
		t.Errorf("%d launches, want 3: none inside the backoff", got)
	}

	for range 10 {
		clk.advance(time.Minute)
		if err := ensure(ctx); err == nil {
			t.Fatal("a failing launch succeeded")
		}
	}
	if got := in.nextLaunch.Sub(clk.now()); got != maxBackoff {
		t.Errorf("the backoff grew to %v, want the cap %v", got, maxBackoff)
	}

	// A launch that succeeds resets the count.
	l.mu.Lock()
	l.fail = nil
	l.mu.Unlock()
	clk.advance(time.Minute)
	if err := ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if in.failures != 0 {
		t.Errorf("failures = %d after a good launch, want 0", in.failures)
	}
}

func TestCrashedAdapterIsRelaunched(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	ctx := t.Context()
	in, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	first := l.started[0]
	l.mu.Unlock()
	first.Crash()

	res, err := in.TestConnection(ctx)
	if err != nil || !res.Reachable {
		t.Fatalf("TestConnection after a crash = %+v, %v; want a relaunched adapter", res, err)
	}
	if got := l.count("fake"); got != 2 {
		t.Errorf("%d launches, want 2 (one relaunch)", got)
	}
	again, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil || again.cfg != in.cfg {
		t.Errorf("the relaunched adapter is not the cached instance: %v", err)
	}
	if got := l.stats.configures.Load(); got != 2 {
		t.Errorf("%d configures, want 2: the instance is configured again in the new process", got)
	}
	if got := readID(t, in); got != "1" {
		t.Errorf("after the relaunch the session read %q", got)
	}
}

func TestCallInFlightWhenTheAdapterDiesFails(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	in, err := h.Instance(t.Context(), spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	// Cut off without being marked exited: the call fails with the
	// transport sentinel and is not retried.
	l.mu.Lock()
	l.started[0].InProcess.Crash()
	l.mu.Unlock()
	if _, err := in.TestConnection(t.Context()); !errors.Is(err, ErrPluginShutdown) {
		t.Errorf("TestConnection on a dead adapter = %v; want ErrPluginShutdown", err)
	}
	if got := l.count("fake"); got != 1 {
		t.Errorf("%d launches, want 1: a failed call is not retried", got)
	}
}

func TestAdapterMustMatchItsKindAndTier(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Unix(1e9, 0)}
	tests := map[string]struct {
		l       *launcher
		kind    string
		config  string
		want    string
		wantCfg bool
	}{
		"other kind":        {l: &launcher{reported: "other"}, kind: "fake", want: `reports kind "other"`},
		"invalid tier":      {l: &launcher{tier: 9}, kind: "fake", want: "declares tier 9"},
		"built-in tier":     {l: &launcher{tier: sdk.TierReacquiredState}, kind: "sql", want: "built-in adapter sql declares tier 3, its mechanism is tier 1"},
		"config refused":    {l: &launcher{}, kind: "fake", config: `{"refuse":true}`, want: "refuse: refused on purpose", wantCfg: true},
		"no adapter at all": {l: &launcher{fail: errors.New("no adapter for kind")}, kind: "fake", want: "no adapter for kind"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, Options{}, tt.l, clk, tt.kind)
			sp := spec(tt.kind, "1")
			if tt.config != "" {
				sp.ConfigJSON = []byte(tt.config)
			}
			_, err := h.Instance(t.Context(), sp)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Instance = %v; want %q", err, tt.want)
			}
			var ce *refusal.Error
			if errors.As(err, &ce) != tt.wantCfg {
				t.Errorf("a *refusal.Error: %v, want %v", !tt.wantCfg, tt.wantCfg)
			}
			h.mu.Lock()
			n := len(h.instances)
			h.mu.Unlock()
			if n != 0 {
				t.Errorf("a refused instance stayed cached (%d)", n)
			}
		})
	}
}

func TestCloseStopsEverythingAndRefusesNewInstances(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	in, err := h.Instance(t.Context(), spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if _, err := h.Instance(t.Context(), spec("fake", "2")); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Instance after Close = %v; want a refusal", err)
	}
	in.cfg.proc.mu.Lock()
	running := in.cfg.proc.c != nil
	in.cfg.proc.mu.Unlock()
	if running {
		t.Error("Close left an adapter running")
	}
}

func TestDiscoveryAndPins(t *testing.T) {
	t.Parallel()
	builtinDir, pluginDir := t.TempDir(), t.TempDir()
	touch := func(dir, name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	touch(builtinDir, BinaryPrefix+"sql")
	touch(builtinDir, BinaryPrefix+"csv-ledger") // not built in: ignored there
	touch(builtinDir, "README")
	touch(pluginDir, BinaryPrefix+"ledger")

	h, err := New(Options{BuiltinDir: builtinDir, PluginDir: pluginDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.Kinds(), ","); got != "ledger,sql" {
		t.Errorf("Kinds = %s, want ledger,sql", got)
	}
	h.Close()

	t.Run("a plugin cannot take a built-in kind", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		touch(dir, BinaryPrefix+"rest")
		if _, err := New(Options{PluginDir: dir}); err == nil || !strings.Contains(err.Error(), `built-in kind "rest"`) {
			t.Errorf("New = %v; want the built-in kind refused", err)
		}
	})
	t.Run("a pin names a binary", func(t *testing.T) {
		t.Parallel()
		_, err := New(Options{PluginDir: pluginDir, Pins: map[string]string{"other": strings.Repeat("0", 64)}})
		if err == nil || !strings.Contains(err.Error(), "plugins.other.sha256: no adapter binary") {
			t.Errorf("New = %v; want the pin refused", err)
		}
	})
	t.Run("a binary that does not match its pin is not run", func(t *testing.T) {
		t.Parallel()
		h, err := New(Options{PluginDir: pluginDir, Pins: map[string]string{"ledger": strings.Repeat("ab", 32)}})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		_, err = h.Instance(t.Context(), spec("ledger", "1"))
		if err == nil || !strings.Contains(err.Error(), "does not match its pinned SHA-256 (plugins.ledger.sha256)") {
			t.Errorf("Instance = %v; want the pin mismatch", err)
		}
	})
	t.Run("a pin must be hex", func(t *testing.T) {
		t.Parallel()
		h, err := New(Options{PluginDir: pluginDir, Pins: map[string]string{"ledger": "not-hex"}})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if _, err := h.Instance(t.Context(), spec("ledger", "1")); err == nil || !strings.Contains(err.Error(), "plugins.ledger.sha256:") {
			t.Errorf("Instance = %v; want the pin refused", err)
		}
	})
	t.Run("no adapter for a kind", func(t *testing.T) {
		t.Parallel()
		h, err := New(Options{PluginDir: pluginDir})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if _, err := h.Instance(t.Context(), spec("nope", "1")); err == nil || !strings.Contains(err.Error(), "known kinds: ledger") {
			t.Errorf("Instance = %v; want the known kinds listed", err)
		}
	})
}

// events counts what the host reports of adapter lifecycles.
type events struct {
	mu                        sync.Mutex
	starts, restarts, crashes map[string]int
}

func (e *events) add(m *map[string]int, kind string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[kind]++
}
func (e *events) PluginStarted(kind string)   { e.add(&e.starts, kind) }
func (e *events) PluginRestarted(kind string) { e.add(&e.restarts, kind) }
func (e *events) PluginCrashed(kind string)   { e.add(&e.crashes, kind) }

func TestEventsReportStartsCrashesAndRestarts(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	ev := &events{}
	h := newHost(t, Options{Events: ev}, l, clk, "fake")
	ctx := t.Context()
	in, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	first := l.started[0]
	l.mu.Unlock()
	first.Crash()
	if _, err := in.TestConnection(ctx); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.starts["fake"] != 2 || ev.crashes["fake"] != 1 || ev.restarts["fake"] != 1 {
		t.Errorf("starts %d, crashes %d, restarts %d; want 2, 1, 1", ev.starts["fake"], ev.crashes["fake"], ev.restarts["fake"])
	}
	if n := h.LiveProcesses(); n != 0 {
		t.Errorf("LiveProcesses = %d with in-process adapters only, want 0", n)
	}
}

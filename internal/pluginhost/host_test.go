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
	"github.com/verifierd/verifierd/sdk/plugin"
)

// fakeAdapter is a no-op adapter whose Info and Configure a test sets.
type fakeAdapter struct {
	kind string
	tier sdk.Tier
}

func (a fakeAdapter) Info() sdk.Info { return sdk.Info{Kind: a.kind, Tier: a.tier} }

func (a fakeAdapter) Configure(_ context.Context, req sdk.ConfigureRequest) error {
	if strings.Contains(string(req.Config), "refuse") {
		return &sdk.ConfigError{Path: "refuse", Message: "refused on purpose"}
	}
	return nil
}

func (fakeAdapter) TestConnection(context.Context) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "fake"}, nil
}

func (fakeAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}

func (fakeAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}

// crashable is an in-process adapter that can die like a process: after
// Crash it reports Exited, and the host must relaunch it.
type crashable struct {
	*plugin.InProcess
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
	ip, err := plugin.NewInProcess(func() sdk.Adapter { return fakeAdapter{kind: reported, tier: tier} }, logger)
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

func spec(kind, id string) Spec {
	return Spec{Kind: kind, ConfigJSON: []byte(`{"kind":"` + kind + `"}`), Params: map[string]string{"id": id}}
}

func TestInstancesAreCachedByKindConfigAndParams(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	ctx := t.Context()
	a, err := h.Instance(ctx, spec("fake", "1"))
	if err != nil {
		t.Fatal(err)
	}
	withSecret := spec("fake", "1")
	withSecret.Secrets = map[string]string{"token": "changed"}
	b, err := h.Instance(ctx, withSecret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Instance(ctx, spec("fake", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same kind, config and params (secrets aside) got a second instance")
	}
	if a == c {
		t.Error("other params shared an instance")
	}
	if got := l.count("fake"); got != 2 {
		t.Errorf("%d launches, want 2", got)
	}
	if res, err := a.TestConnection(ctx); err != nil || !res.Reachable {
		t.Errorf("TestConnection = %+v, %v", res, err)
	}
	if a.Kind() != "fake" || a.Info().Tier != sdk.TierIndependentSystem || a.Pid() != 0 {
		t.Errorf("kind %q, info %+v, pid %d", a.Kind(), a.Info(), a.Pid())
	}
}

func TestEvictionStopsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{MaxInstances: 2}, l, clk, "fake")
	ctx := t.Context()
	use := func(id string) *Instance {
		t.Helper()
		clk.advance(time.Second)
		in, err := h.Instance(ctx, spec("fake", id))
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	a := use("a")
	use("b")
	if use("a") != a {
		t.Fatal("a was not reused")
	}
	use("c") // b is now the least recently used
	h.mu.Lock()
	n := len(h.instances)
	_, hasA := h.instances[spec("fake", "a").key()]
	_, hasB := h.instances[spec("fake", "b").key()]
	h.mu.Unlock()
	if n != 2 || !hasA || hasB {
		t.Errorf("after eviction: %d instances, a kept %v, b kept %v; want 2, true, false", n, hasA, hasB)
	}
	before := l.count("fake")
	use("b")
	if got := l.count("fake"); got != before+1 {
		t.Errorf("an evicted instance was not started afresh: %d launches, want %d", got, before+1)
	}
}

func TestBackoffBetweenFailedLaunches(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{fail: errors.New("exec format error")}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "fake")
	in := &Instance{host: h, spec: spec("fake", "1"), logger: hclog.NewNullLogger()}
	ctx := t.Context()

	wantDelays := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for i, want := range wantDelays {
		if err := in.ensure(ctx); err == nil || !strings.Contains(err.Error(), "exec format error") {
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
	if err := in.ensure(short); err == nil || !strings.Contains(err.Error(), "waiting to relaunch") {
		t.Errorf("ensure inside the backoff = %v; want waiting to relaunch", err)
	}
	if got := l.count("fake"); got != 3 {
		t.Errorf("%d launches, want 3: none inside the backoff", got)
	}

	for range 10 {
		clk.advance(time.Minute)
		if err := in.ensure(ctx); err == nil {
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
	if err := in.ensure(ctx); err != nil {
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
	if err != nil || again != in {
		t.Errorf("the relaunched adapter is not the cached instance: %v", err)
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
			var ce *ConfigError
			if errors.As(err, &ce) != tt.wantCfg {
				t.Errorf("a *ConfigError: %v, want %v", !tt.wantCfg, tt.wantCfg)
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

func TestSparesAreKeptReadyAndTaken(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{Spares: 2}, l, clk, "fake")
	ctx := t.Context()
	spares := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.spares["fake"])
	}
	waitSpares := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for spares() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d spares, want %d", spares(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, err := h.Instance(ctx, spec("fake", "1")); err != nil {
		t.Fatal(err)
	}
	waitSpares(2)
	if got := l.count("fake"); got != 3 {
		t.Errorf("%d launches, want 3: the instance and two spares", got)
	}

	// A new instance takes a spare, and the spares are refilled.
	if _, err := h.Instance(ctx, spec("fake", "2")); err != nil {
		t.Fatal(err)
	}
	waitSpares(2)
	if got := l.count("fake"); got != 4 {
		t.Errorf("%d launches, want 4: one refill", got)
	}

	// A spare that died meanwhile is thrown away, not handed out.
	h.mu.Lock()
	for _, c := range h.spares["fake"] {
		c.(*crashable).Crash()
	}
	h.mu.Unlock()
	in, err := h.Instance(ctx, spec("fake", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := in.TestConnection(ctx); err != nil || !res.Reachable {
		t.Errorf("the instance got a dead spare: %+v, %v", res, err)
	}
	waitSpares(2)

	// In-process adapters (no binary) get no spares.
	h.RegisterInProcess("inproc", func() sdk.Adapter { return fakeAdapter{kind: "inproc", tier: 1} })
	h.startConn = h.start
	if _, err := h.Instance(ctx, spec("inproc", "1")); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	n := len(h.spares["inproc"])
	h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d spares of an in-process kind, want 0", n)
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
	in.mu.Lock()
	running := in.c != nil
	in.mu.Unlock()
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

// Package pluginhost runs adapters for the daemon: it discovers adapter
// binaries (verifier-adapter-<kind>), verifies optional SHA-256 pins, starts
// them as go-plugin subprocesses with AutoMTLS and an empty environment
// (but for the OpenTelemetry variables of package sdk/unstable/host/tracing, when set),
// configures them, restarts a crashed one (with backoff between failed
// launches), and never lets a plugin take a built-in kind's name. It drives
// each adapter through the SDK's client (package sdk/unstable/host), the one the
// SDK's qualification kit drives adapters through too.
//
// One adapter process serves every session of its kind: the host starts at
// most one process per kind, configures one instance in it per distinct
// deployment section (kind, configuration, secrets and settlement window,
// never the run parameters), and every call carries the session's bound run
// parameters, which the adapter substitutes per call. Configured instances
// are cached and evicted least recently used (the process is told to
// Release them); concurrent captures to one process are bounded by the
// max_concurrent_captures its adapter declares.
package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// BinaryPrefix starts every adapter binary's name.
const BinaryPrefix = builtin.BinaryPrefix

// ErrPluginShutdown is every transport failure to an adapter. A session
// turns it into INDETERMINATE (unavailable), never CONFIRMED.
var ErrPluginShutdown = host.ErrPluginShutdown

// Options configure a Host.
type Options struct {
	// BuiltinDir holds the first-party adapter binaries (normally the
	// folder of the verifierd binary).
	BuiltinDir string
	// PluginDir holds customer adapter binaries.
	PluginDir string
	// Pins maps a kind to the hex SHA-256 its binary must have.
	Pins   map[string]string
	Logger hclog.Logger
	// MaxInstances bounds the cached configured instances (default 64);
	// the least recently used is released past it.
	MaxInstances int
	// MaxConcurrentCaptures is the per-process bound on captures in
	// flight for an adapter that declares none (default 16).
	MaxConcurrentCaptures int
	// Events hears of adapter starts, relaunches and crashes (the
	// daemon's metrics); nil: no one.
	Events Events
}

// Events is told of adapter lifecycle points. Implementations must be
// quick and safe for concurrent use.
type Events interface {
	PluginStarted(kind string)
	PluginRestarted(kind string)
	PluginCrashed(kind string)
}

type noEvents struct{}

func (noEvents) PluginStarted(string)   {}
func (noEvents) PluginRestarted(string) {}
func (noEvents) PluginCrashed(string)   {}

// Host starts and caches adapters.
type Host struct {
	opts      Options
	logger    hclog.Logger
	binaries  map[string]string // kind -> path
	inProcess map[string]func() sdk.Adapter

	mu        sync.Mutex
	procs     map[string]*proc       // kind -> its one process
	instances map[string]*configured // Spec.key -> configured instance
	closed    bool

	// now and startConn are seams for the package's tests: the clock of
	// eviction and launch backoff, and how an adapter is started.
	now       func() time.Time
	startConn func(kind string, logger hclog.Logger) (conn, error)
}

// New discovers the adapter binaries. A binary in the plugin dir named for a
// built-in kind is refused: the daemon must not start with it there.
func New(opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.MaxInstances <= 0 {
		opts.MaxInstances = 64
	}
	if opts.MaxConcurrentCaptures <= 0 {
		opts.MaxConcurrentCaptures = 16
	}
	if opts.Events == nil {
		opts.Events = noEvents{}
	}
	h := &Host{
		opts: opts, logger: opts.Logger,
		binaries:  map[string]string{},
		inProcess: map[string]func() sdk.Adapter{},
		procs:     map[string]*proc{},
		instances: map[string]*configured{},
		now:       time.Now,
	}
	h.startConn = h.start
	if err := h.scan(opts.BuiltinDir, true); err != nil {
		return nil, err
	}
	if err := h.scan(opts.PluginDir, false); err != nil {
		return nil, err
	}
	for kind := range opts.Pins {
		if _, ok := h.binaries[kind]; !ok {
			return nil, fmt.Errorf("plugins.%s.sha256: no adapter binary %s%s in the builtin or plugin dir", kind, BinaryPrefix, kind)
		}
	}
	return h, nil
}

func (h *Host) scan(dir string, firstParty bool) error {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && firstParty {
			return nil
		}
		return fmt.Errorf("reading adapter dir %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, BinaryPrefix) || e.IsDir() {
			continue
		}
		kind := strings.TrimPrefix(name, BinaryPrefix)
		path := filepath.Join(dir, name)
		if firstParty {
			if !builtin.IsKind(kind) {
				continue // only first-party kinds come from the builtin dir
			}
		} else if builtin.IsKind(kind) {
			return fmt.Errorf("plugin %s takes the name of the built-in kind %q; a plugin can never shadow a built-in kind: rename it or remove it from %s", path, kind, dir)
		}
		if prev, dup := h.binaries[kind]; dup && !firstParty {
			return fmt.Errorf("two adapter binaries for kind %q: %s and %s", kind, prev, path)
		}
		h.binaries[kind] = path
	}
	return nil
}

// RegisterInProcess serves kind in process with factory instead of a binary:
// for first-party adapters in tests.
func (h *Host) RegisterInProcess(kind string, factory func() sdk.Adapter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inProcess[kind] = factory
}

// Kinds lists the kinds this host can run.
func (h *Host) Kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var kinds []string
	for k := range h.binaries {
		kinds = append(kinds, k)
	}
	for k := range h.inProcess {
		if _, dup := h.binaries[k]; !dup {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// Spec is what an instance is built from.
type Spec struct {
	Kind       string
	ConfigJSON []byte
	// Params are the session's bound run parameters. They never select a
	// process or an instance: every call carries them.
	Params  map[string]string
	Secrets map[string]string
	// EffectTimeout is the longest settlement window of the run.
	EffectTimeout time.Duration
	// ParamsChecked skips the CheckParams round trip: the caller's
	// capture binds the parameters itself. Begin's baseline capture does
	// so first thing (the SDK's server runs the adapter's CheckParams
	// before reading) and refuses with the same path and message; Verify
	// and Reverify checked them when the session began, and an after read
	// that no longer binds is refused there: an unreachable read, never a
	// guess. Instance.CheckParams asks for a candidate that is not read.
	ParamsChecked bool
}

// key identifies a configured instance: kind, configuration, secrets and
// settlement window, never the run parameters. The secrets enter as a
// digest only, so a changed secret value configures a new instance.
func (s Spec) key() string {
	h := sha256.New()
	io.WriteString(h, s.Kind+"\x00")
	h.Write(s.ConfigJSON)
	fmt.Fprintf(h, "\x00%d", s.EffectTimeout)
	keys := slices.Sorted(maps.Keys(s.Secrets))
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%q=%q", k, s.Secrets[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Instance returns the configured adapter for spec bound to spec.Params,
// starting the kind's process and configuring the instance when needed. A
// configuration refusal is a *refusal.Error.
func (h *Host) Instance(ctx context.Context, spec Spec) (*Instance, error) {
	key := spec.key()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("the daemon is shutting down")
	}
	cfg, ok := h.instances[key]
	if !ok {
		p := h.procLocked(spec.Kind)
		cfg = &configured{host: h, proc: p, spec: spec, logger: p.logger, configuring: make(chan struct{}, 1)}
		cfg.spec.Params = nil
		h.instances[key] = cfg
	}
	cfg.lastUsed = h.now()
	h.evictLocked()
	h.mu.Unlock()

	c, id, err := cfg.client(ctx)
	if err != nil {
		if !ok {
			h.mu.Lock()
			if h.instances[key] == cfg {
				delete(h.instances, key)
			}
			h.mu.Unlock()
		}
		return nil, err
	}
	// The session's parameters must bind into the configured read before
	// anything is read: a missing or refused one refuses it here, with
	// its path, as a configuration would (or, ParamsChecked, in the
	// caller's capture).
	if !spec.ParamsChecked {
		if err := checkParams(ctx, c, id, spec.Kind, spec.Params); err != nil {
			return nil, err
		}
	}
	return &Instance{cfg: cfg, params: spec.Params}, nil
}

// checkParams asks instance id whether params bind: nil, a *refusal.Error,
// or the failed call.
func checkParams(ctx context.Context, c conn, id, kind string, params map[string]string) error {
	if err := c.CheckParams(ctx, id, params); err != nil {
		if ce, isCE := errors.AsType[*refusal.Error](err); isCE {
			return ce
		}
		return fmt.Errorf("adapter %s: check params: %w", kind, err)
	}
	return nil
}

// procLocked returns the kind's process record, creating it (not starting
// it) on first use.
func (h *Host) procLocked(kind string) *proc {
	p, ok := h.procs[kind]
	if !ok {
		p = &proc{host: h, kind: kind, logger: h.logger.Named("adapter." + kind)}
		h.procs[kind] = p
	}
	return p
}

// evictLocked releases the least recently used instances past
// MaxInstances; their process keeps running for the others.
func (h *Host) evictLocked() {
	for len(h.instances) > h.opts.MaxInstances {
		var oldest string
		var at time.Time
		for k, in := range h.instances {
			if oldest == "" || in.lastUsed.Before(at) {
				oldest, at = k, in.lastUsed
			}
		}
		go h.instances[oldest].release()
		delete(h.instances, oldest)
	}
}

// Close stops every adapter process.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	procs := h.procs
	h.procs = map[string]*proc{}
	h.instances = map[string]*configured{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// start starts a fresh adapter process (or in-process server) for kind.
func (h *Host) start(kind string, logger hclog.Logger) (conn, error) {
	h.mu.Lock()
	factory := h.inProcess[kind]
	path, hasBinary := h.binaries[kind]
	h.mu.Unlock()
	if factory != nil && !hasBinary {
		return host.NewInProcess(factory, logger)
	}
	if !hasBinary {
		return nil, fmt.Errorf("no adapter for kind %q: put %s%s in the plugin dir (known kinds: %s)", kind, BinaryPrefix, kind, strings.Join(h.Kinds(), ", "))
	}
	cmd := exec.Command(path)
	// Adapters get secrets through Configure only; the environment holds
	// nothing but the trace variables (tracing.PassedEnv), when set.
	cmd.Env = tracing.Env(os.Environ())
	setParentDeathSignal(cmd)
	cfg := host.ClientConfig(cmd, logger)
	if pin := h.opts.Pins[kind]; pin != "" {
		sum, err := hex.DecodeString(pin)
		if err != nil {
			return nil, fmt.Errorf("plugins.%s.sha256: %v", kind, err)
		}
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	sp, err := host.Start(cfg)
	if err != nil {
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, fmt.Errorf("adapter %s does not match its pinned SHA-256 (plugins.%s.sha256); refusing to run it", path, kind)
		}
		return nil, fmt.Errorf("adapter %s failed to start: %w", path, err)
	}
	return sp, nil
}

// conn is a running adapter: a subprocess or an in-process server.
type conn interface {
	host.Client
}

func stopConn(c conn) {
	switch x := c.(type) {
	case *host.Subprocess:
		x.Kill()
	case io.Closer:
		x.Close()
	}
}

// exited reports whether a conn's process has died; an in-process adapter
// never exits unless it says so (the package's tests make one that does).
func exited(c conn) bool {
	switch x := c.(type) {
	case *host.Subprocess:
		return x.Plugin.Exited()
	case interface{ Exited() bool }:
		return x.Exited()
	}
	return false
}

// Pid returns the adapter process id of a subprocess conn, or 0.
func pid(c conn) int {
	if sp, ok := c.(*host.Subprocess); ok {
		return sp.Pid()
	}
	return 0
}

// LiveProcesses counts the adapter processes running now (in-process
// adapters are not processes).
func (h *Host) LiveProcesses() int {
	n := 0
	for _, c := range h.PluginPids() {
		n += len(c)
	}
	return n
}

// PluginPids lists the live adapter process ids by kind.
func (h *Host) PluginPids() map[string][]int {
	h.mu.Lock()
	procs := make([]*proc, 0, len(h.procs))
	for _, p := range h.procs {
		procs = append(procs, p)
	}
	h.mu.Unlock()
	out := map[string][]int{}
	// A process's lock is taken after the host's is released (a launch
	// takes the host's); ensure never holds it while launching.
	for _, p := range procs {
		p.mu.Lock()
		if p.c != nil && pid(p.c) != 0 && !exited(p.c) {
			out[p.kind] = append(out[p.kind], pid(p.c))
		}
		p.mu.Unlock()
	}
	return out
}

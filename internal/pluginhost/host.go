// Package pluginhost runs adapters for the daemon: it discovers adapter
// binaries (verifier-adapter-<kind>), verifies optional SHA-256 pins, starts
// them as go-plugin subprocesses with AutoMTLS and an empty environment
// (but for the OpenTelemetry variables of package sdk/tracing, when set),
// configures them, restarts a crashed one (with backoff between failed
// launches), and never lets a plugin take a built-in kind's name.
//
// A configured adapter is an Instance, cached by its kind, configuration and
// run parameters, so that a Begin and its Verify (and the next run with the
// same parameters) reuse one process.
package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
	"github.com/verifierd/verifierd/sdk/tracing"
)

// BinaryPrefix starts every adapter binary's name.
const BinaryPrefix = builtin.BinaryPrefix

// ErrPluginShutdown is every transport failure to an adapter. A session
// turns it into INDETERMINATE (unavailable), never CONFIRMED.
var ErrPluginShutdown = plugin.ErrPluginShutdown

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
	// MaxInstances bounds the cached configured adapters (default 64); the
	// least recently used is stopped past it.
	MaxInstances int
	// Spares is how many started, handshaken adapter processes to keep
	// ready per kind once that kind has been used (0: none). An instance
	// for new run parameters then takes a spare instead of waiting for a
	// process to start (about 40 ms), and a replacement starts in the
	// background. A spare is configured once, when taken, like any
	// adapter.
	Spares int
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
	instances map[string]*Instance
	closed    bool
	spares    map[string][]conn // kind -> started, unconfigured adapters
	refilling map[string]bool

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
	if opts.Events == nil {
		opts.Events = noEvents{}
	}
	h := &Host{
		opts: opts, logger: opts.Logger,
		binaries:  map[string]string{},
		inProcess: map[string]func() sdk.Adapter{},
		instances: map[string]*Instance{},
		spares:    map[string][]conn{},
		refilling: map[string]bool{},
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
	sort.Strings(kinds)
	return kinds
}

// Spec is what an instance is built from.
type Spec struct {
	Kind       string
	ConfigJSON []byte
	Params     map[string]string
	Secrets    map[string]string
	// EffectTimeout is the longest settlement window of the run.
	EffectTimeout time.Duration
}

// key identifies a configured instance: kind, config and params. Secrets are
// never part of it; a changed secret value takes effect on the next launch.
func (s Spec) key() string {
	h := sha256.New()
	io.WriteString(h, s.Kind+"\x00")
	h.Write(s.ConfigJSON)
	keys := make([]string, 0, len(s.Params))
	for k := range s.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%s=%s", k, s.Params[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Instance returns the configured adapter for spec, starting and configuring
// it when needed. A configuration refusal is a *ConfigError.
func (h *Host) Instance(ctx context.Context, spec Spec) (*Instance, error) {
	key := spec.key()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("the daemon is shutting down")
	}
	inst, ok := h.instances[key]
	if !ok {
		inst = &Instance{host: h, spec: spec, logger: h.logger.Named("adapter." + spec.Kind)}
		h.instances[key] = inst
	}
	inst.lastUsed = h.now()
	h.evictLocked()
	h.mu.Unlock()

	if err := inst.ensure(ctx); err != nil {
		if !ok {
			h.mu.Lock()
			if h.instances[key] == inst {
				delete(h.instances, key)
			}
			h.mu.Unlock()
		}
		return nil, err
	}
	return inst, nil
}

func (h *Host) evictLocked() {
	for len(h.instances) > h.opts.MaxInstances {
		var oldest string
		var at time.Time
		for k, in := range h.instances {
			if oldest == "" || in.lastUsed.Before(at) {
				oldest, at = k, in.lastUsed
			}
		}
		go h.instances[oldest].stop()
		delete(h.instances, oldest)
	}
}

// Close stops every adapter, spares included.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	insts := h.instances
	h.instances = map[string]*Instance{}
	spares := h.spares
	h.spares = map[string][]conn{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(func() { ; in.stop() })
	}
	for _, list := range spares {
		for _, c := range list {
			wg.Go(func() { ; stopConn(c) })
		}
	}
	wg.Wait()
}

// takeSpare returns a started adapter of kind if one is ready, and starts
// refilling the spares in the background.
func (h *Host) takeSpare(kind string) conn {
	if h.opts.Spares <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var got conn
	for len(h.spares[kind]) > 0 && got == nil {
		list := h.spares[kind]
		c := list[len(list)-1]
		h.spares[kind] = list[:len(list)-1]
		if exited(c) {
			stopConn(c)
			continue
		}
		got = c
	}
	h.refillLocked(kind)
	return got
}

// refillLocked starts spares of kind in the background until there are
// opts.Spares of them; one refill per kind at a time.
func (h *Host) refillLocked(kind string) {
	if h.closed || h.refilling[kind] || len(h.spares[kind]) >= h.opts.Spares {
		return
	}
	if _, ok := h.binaries[kind]; !ok {
		return // in-process adapters need no spares
	}
	h.refilling[kind] = true
	go func() {
		logger := h.logger.Named("adapter." + kind)
		for {
			h.mu.Lock()
			done := h.closed || len(h.spares[kind]) >= h.opts.Spares
			if done {
				h.refilling[kind] = false
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			c, err := h.startConn(kind, logger)
			h.mu.Lock()
			if err != nil || h.closed {
				h.refilling[kind] = false
				h.mu.Unlock()
				if c != nil {
					stopConn(c)
				}
				if err != nil {
					logger.Warn("could not start a spare adapter", "error", err)
				}
				return
			}
			h.spares[kind] = append(h.spares[kind], c)
			h.mu.Unlock()
			h.opts.Events.PluginStarted(kind)
		}
	}()
}

// ConfigError is an adapter's refusal of its configuration.
type ConfigError = sdk.ConfigError

// launch returns a started adapter for kind: a spare when one is ready,
// otherwise a process (or in-process server) started now.
func (h *Host) launch(kind string, logger hclog.Logger) (conn, error) {
	if c := h.takeSpare(kind); c != nil {
		return c, nil
	}
	c, err := h.startConn(kind, logger)
	if err == nil {
		h.opts.Events.PluginStarted(kind)
		h.mu.Lock()
		h.refillLocked(kind)
		h.mu.Unlock()
	}
	return c, err
}

// start starts a fresh adapter process (or in-process server) for kind.
func (h *Host) start(kind string, logger hclog.Logger) (conn, error) {
	h.mu.Lock()
	factory := h.inProcess[kind]
	path, hasBinary := h.binaries[kind]
	h.mu.Unlock()
	if factory != nil && !hasBinary {
		return plugin.NewInProcess(factory, logger)
	}
	if !hasBinary {
		return nil, fmt.Errorf("no adapter for kind %q: put %s%s in the plugin dir (known kinds: %s)", kind, BinaryPrefix, kind, strings.Join(h.Kinds(), ", "))
	}
	cmd := exec.Command(path)
	// Adapters get secrets through Configure only; the environment holds
	// nothing but the trace variables (tracing.PassedEnv), when set.
	cmd.Env = tracing.Env(os.Environ())
	setParentDeathSignal(cmd)
	cfg := plugin.ClientConfig(cmd, logger)
	if pin := h.opts.Pins[kind]; pin != "" {
		sum, err := hex.DecodeString(pin)
		if err != nil {
			return nil, fmt.Errorf("plugins.%s.sha256: %v", kind, err)
		}
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	sp, err := plugin.Start(cfg)
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
	plugin.Client
}

func stopConn(c conn) {
	switch x := c.(type) {
	case *plugin.Subprocess:
		x.Kill()
	case io.Closer:
		x.Close()
	}
}

// exited reports whether a conn's process has died; an in-process adapter
// never exits unless it says so (the package's tests make one that does).
func exited(c conn) bool {
	switch x := c.(type) {
	case *plugin.Subprocess:
		return x.Plugin.Exited()
	case interface{ Exited() bool }:
		return x.Exited()
	}
	return false
}

// Pid returns the adapter process id of a subprocess conn, or 0.
func pid(c conn) int {
	if sp, ok := c.(*plugin.Subprocess); ok {
		return sp.Pid()
	}
	return 0
}

// LiveProcesses counts the adapter processes running now: configured
// adapters and spares (in-process adapters are not processes).
func (h *Host) LiveProcesses() int {
	h.mu.Lock()
	insts := make([]*Instance, 0, len(h.instances))
	for _, in := range h.instances {
		insts = append(insts, in)
	}
	n := 0
	for _, list := range h.spares {
		for _, c := range list {
			if pid(c) != 0 && !exited(c) {
				n++
			}
		}
	}
	h.mu.Unlock()
	// An instance's lock is taken after the host's is released: ensure
	// holds an instance's lock while launching, which takes the host's.
	for _, in := range insts {
		in.mu.Lock()
		if in.c != nil && pid(in.c) != 0 && !exited(in.c) {
			n++
		}
		in.mu.Unlock()
	}
	return n
}

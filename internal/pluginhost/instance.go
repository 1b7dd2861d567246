package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// Backoff between failed launches of one kind's process.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// proc is the one adapter process of a kind. It relaunches the process if
// it died since the last call (with backoff between failed launches); every
// launch is a new generation, and an instance configured in an older
// generation configures itself again in the new one.
type proc struct {
	host   *Host
	kind   string
	logger hclog.Logger

	mu         sync.Mutex
	c          conn
	gen        uint64
	info       host.AdapterInfo // the process-level answer, checked
	version    string           // the negotiated API version
	slots      chan struct{}
	failures   int
	nextLaunch time.Time
	// relaunch is set when the process exited and is not running again
	// yet, so that its next start counts as a restart.
	relaunch bool
	// starting is set while one caller launches the process (outside mu);
	// it is closed when that launch is over.
	starting chan struct{}
	// stopped is set by stop (Close): no launch after it, and one that was
	// under way stops the process it started.
	stopped bool
}

// ensure starts the process unless it is running, and returns it with its
// generation. The launch (its backoff wait and the process start) runs
// outside p.mu, so that the running process's other users, PluginPids and
// Close never wait for it: one caller launches (p.starting is set meanwhile)
// and the others wait for it, each until its own context ends, then look
// again.
func (p *proc) ensure(ctx context.Context) (conn, uint64, error) {
	for {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return nil, 0, fmt.Errorf("adapter %s: the daemon is shutting down", p.kind)
		}
		if p.c != nil && !exited(p.c) {
			c, gen := p.c, p.gen
			p.mu.Unlock()
			return c, gen, nil
		}
		if starting := p.starting; starting != nil {
			p.mu.Unlock()
			select {
			case <-starting:
				continue
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("adapter %s: waiting for its process to start: %w", p.kind, ctx.Err())
			}
		}
		if p.c != nil {
			p.logger.Warn("adapter process exited; relaunching")
			p.host.opts.Events.PluginCrashed(p.kind)
			stopConn(p.c)
			p.c = nil
			p.relaunch = true
		}
		wait := p.nextLaunch.Sub(p.host.now())
		done := make(chan struct{})
		p.starting = done
		p.mu.Unlock()
		return p.launch(ctx, wait, done)
	}
}

// launch waits out the backoff, starts the process and records the outcome;
// it closes done (p.starting) when it is over, whatever the outcome.
func (p *proc) launch(ctx context.Context, wait time.Duration, done chan struct{}) (conn, uint64, error) {
	var (
		c             conn
		info          host.AdapterInfo
		version       string
		err           error
		waitCancelled bool
	)
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			err, waitCancelled = fmt.Errorf("adapter %s: waiting to relaunch: %w", p.kind, ctx.Err()), true
		case <-t.C:
		}
	}
	if err == nil {
		c, info, version, err = p.start(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer close(done)
	p.starting = nil
	if err == nil && p.stopped {
		stopConn(c)
		err = fmt.Errorf("adapter %s: the daemon is shutting down", p.kind)
	}
	if err != nil {
		if !waitCancelled {
			p.failures++
			backoff := min(firstBackoff<<min(p.failures-1, 10), maxBackoff)
			p.nextLaunch = p.host.now().Add(backoff)
		}
		return nil, 0, err
	}
	n := info.MaxConcurrentCaptures
	if n <= 0 {
		n = p.host.opts.MaxConcurrentCaptures
	}
	p.c, p.info, p.version, p.failures = c, info, version, 0
	p.slots = make(chan struct{}, n)
	p.gen++
	if p.relaunch {
		p.relaunch = false
		p.host.opts.Events.PluginRestarted(p.kind)
	}
	return c, p.gen, nil
}

// start launches the process and checks what it says about itself.
func (p *proc) start(ctx context.Context) (conn, host.AdapterInfo, string, error) {
	kind := p.kind
	c, err := p.host.startConn(kind, p.logger)
	if err != nil {
		return nil, host.AdapterInfo{}, "", err
	}
	p.host.opts.Events.PluginStarted(kind)
	fail := func(err error) (conn, host.AdapterInfo, string, error) {
		stopConn(c)
		return nil, host.AdapterInfo{}, "", err
	}
	info, err := c.GetInfo(ctx, "")
	if err != nil {
		return fail(fmt.Errorf("adapter %s: get info: %w", kind, err))
	}
	switch {
	case info.Kind != kind:
		return fail(fmt.Errorf("adapter binary for kind %q reports kind %q; rename the binary or fix its Info", kind, info.Kind))
	case !info.Tier.Valid():
		return fail(fmt.Errorf("adapter %s declares tier %d; a tier is 1 to 4", kind, info.Tier))
	}
	b, isBuiltin := builtin.Lookup(kind)
	switch {
	case isBuiltin && !b.ConfiguredTier && info.Tier != b.Tier:
		return fail(fmt.Errorf("built-in adapter %s declares tier %d, its mechanism is tier %d", kind, info.Tier, b.Tier))
	case isBuiltin && b.ConfiguredTier && info.Tier < b.Tier:
		return fail(fmt.Errorf("built-in adapter %s declares tier %d, stronger than its mechanism's best (%d)", kind, info.Tier, b.Tier))
	}
	version, err := host.NegotiateAPIVersion(info.APIVersions)
	if err != nil {
		return fail(fmt.Errorf("adapter %s: %w", kind, err))
	}
	return c, info, version, nil
}

// current returns the running process and its generation without starting
// it.
func (p *proc) current() (conn, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c, p.gen
}

// acquire takes one capture slot of generation gen's process, waiting for
// one to free up; the returned func gives it back (once).
func (p *proc) acquire(ctx context.Context) (func(), error) {
	p.mu.Lock()
	slots := p.slots
	p.mu.Unlock()
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("adapter %s: waiting for a capture slot (max_concurrent_captures %d): %w", p.kind, cap(slots), ctx.Err())
	}
	var once sync.Once
	return func() { once.Do(func() { <-slots }) }, nil
}

func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		stopConn(p.c)
	}
}

func (p *proc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.c != nil {
		stopConn(p.c)
		p.c = nil
	}
}

// configured is one configured instance inside its kind's process.
type configured struct {
	host     *Host
	proc     *proc
	spec     Spec // Params unset
	logger   hclog.Logger
	lastUsed time.Time

	// configuring is held (a one-slot channel, so that a waiter can give
	// up when its context ends) by the one call configuring the instance.
	configuring chan struct{}

	mu   sync.Mutex
	gen  uint64 // the process generation id belongs to
	id   string
	info host.AdapterInfo
	// noHook is set once the adapter answered that it has no Verdict hook,
	// so later verdicts skip the round trip.
	noHook bool
}

// client returns the running process and the instance's id in it,
// configuring the instance again when the process was relaunched. No lock
// is held while the process starts; one caller configures at a time
// (cf.configuring), and the others wait for it until their context ends.
func (cf *configured) client(ctx context.Context) (conn, string, error) {
	c, gen, err := cf.proc.ensure(ctx)
	if err != nil {
		return nil, "", err
	}
	if id := cf.current(gen); id != "" {
		return c, id, nil
	}
	select {
	case cf.configuring <- struct{}{}:
	case <-ctx.Done():
		return nil, "", fmt.Errorf("adapter %s: waiting for its instance to be configured: %w", cf.spec.Kind, ctx.Err())
	}
	defer func() { <-cf.configuring }()
	if id := cf.current(gen); id != "" {
		return c, id, nil
	}
	cf.mu.Lock()
	cf.id = ""
	cf.mu.Unlock()
	kind := cf.spec.Kind
	cf.proc.mu.Lock()
	version, pinfo := cf.proc.version, cf.proc.info
	cf.proc.mu.Unlock()
	id, err := c.Configure(ctx, sdk.ConfigureRequest{
		Kind:          kind,
		Config:        cf.spec.ConfigJSON,
		Secrets:       cf.spec.Secrets,
		EffectTimeout: cf.spec.EffectTimeout,
		APIVersion:    version,
	})
	if err != nil {
		if ce, ok := errors.AsType[*refusal.Error](err); ok {
			return nil, "", ce
		}
		return nil, "", fmt.Errorf("adapter %s: configure: %w", kind, err)
	}
	if id == "" {
		return nil, "", fmt.Errorf("adapter %s: configure: %w: no instance id", kind, host.ErrProtocol)
	}
	// The tier may depend on the configuration (onscreen: re-opening the
	// record is tier 3, reading the save's own screen tier 4). Ask about
	// the instance and keep the weaker answer, and never one stronger than
	// the kind's floor: a configuration can weaken a tier, never
	// strengthen it.
	after, err := c.GetInfo(ctx, id)
	if err != nil {
		go func() { _ = c.Release(context.Background(), id) }()
		return nil, "", fmt.Errorf("adapter %s: get info after configure: %w", kind, err)
	}
	if !after.Tier.Valid() {
		go func() { _ = c.Release(context.Background(), id) }()
		return nil, "", fmt.Errorf("adapter %s declares tier %d after configure; a tier is 1 to 4", kind, after.Tier)
	}
	b, _ := builtin.Lookup(kind)
	info := pinfo
	info.Tier = max(pinfo.Tier, after.Tier, b.Tier) // b.Tier is 0 for a customer kind
	cf.mu.Lock()
	cf.id, cf.gen, cf.info = id, gen, info
	cf.mu.Unlock()
	return c, id, nil
}

// current is the instance's id when it is configured in generation gen of
// its process, else "".
func (cf *configured) current(gen uint64) string {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.gen == gen {
		return cf.id
	}
	return ""
}

// release tells the process to drop the instance (an evicted one).
func (cf *configured) release() {
	cf.mu.Lock()
	id, gen := cf.id, cf.gen
	cf.id = ""
	cf.mu.Unlock()
	c, cur := cf.proc.current()
	if id == "" || c == nil || cur != gen || exited(c) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Release(ctx, id); err != nil {
		cf.logger.Debug("releasing an evicted adapter instance", "error", err)
	}
}

// Instance is one session's view of a configured adapter: the shared
// instance in its kind's process, and the session's bound run parameters,
// which every call carries. A call that was in flight when the process died
// fails with an error wrapping ErrPluginShutdown and is not retried, so
// that the caller records the read as unavailable; the next call relaunches
// the process and configures the instance again.
type Instance struct {
	cfg    *configured
	params map[string]string
}

// Info returns what the adapter declared for this configuration.
func (in *Instance) Info() sdk.Info {
	in.cfg.mu.Lock()
	defer in.cfg.mu.Unlock()
	return in.cfg.info.Info
}

// Kind is the adapter's kind.
func (in *Instance) Kind() string { return in.cfg.spec.Kind }

// Pid is the adapter's process id (0 in process or when not running).
func (in *Instance) Pid() int {
	c, _ := in.cfg.proc.current()
	if c == nil {
		return 0
	}
	return pid(c)
}

// TestConnection runs the adapter's preflight with the session's
// parameters. A parameter the adapter cannot bind is a *refusal.Error.
func (in *Instance) TestConnection(ctx context.Context) (sdk.TestResult, error) {
	c, id, err := in.cfg.client(ctx)
	if err != nil {
		return sdk.TestResult{}, err
	}
	return c.TestConnection(ctx, id, sdk.TestRequest{Params: in.params})
}

// CheckParams asks the adapter whether the session's parameters bind into
// its read, without reading: nil when they do (or the adapter binds none),
// a *refusal.Error when they do not.
func (in *Instance) CheckParams(ctx context.Context) error {
	c, id, err := in.cfg.client(ctx)
	if err != nil {
		return err
	}
	return checkParams(ctx, c, id, in.cfg.spec.Kind, in.params)
}

// CaptureBefore starts a baseline read with the session's parameters. A
// parameter the adapter cannot bind is a *refusal.Error.
func (in *Instance) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	return in.capture(ctx, req, conn.CaptureBefore)
}

// CaptureAfter starts an after read with the session's parameters.
func (in *Instance) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	return in.capture(ctx, req, conn.CaptureAfter)
}

// capture runs one capture inside one of the process's capture slots; the
// slot is held until the capture is closed or consumed, or ctx ends.
func (in *Instance) capture(ctx context.Context, req sdk.CaptureRequest, call func(conn, context.Context, string, sdk.CaptureRequest) (*host.Stream, error)) (*host.Stream, error) {
	c, id, err := in.cfg.client(ctx)
	if err != nil {
		return nil, err
	}
	release, err := in.cfg.proc.acquire(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, release)
	req.Params = in.params
	capt, err := call(c, ctx, id, req)
	if err != nil {
		stop()
		release()
		return nil, err
	}
	capt.OnClose(func() { stop(); release() })
	return capt, nil
}

// Verdict calls the adapter's optional demotion hook. It returns
// host.ErrNoVerdictHook (wrapped) when the adapter has none.
func (in *Instance) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	in.cfg.mu.Lock()
	noHook := in.cfg.noHook
	in.cfg.mu.Unlock()
	if noHook {
		return sdk.Demotion{}, fmt.Errorf("adapter %s: %w", in.Kind(), host.ErrNoVerdictHook)
	}
	c, id, err := in.cfg.client(ctx)
	if err != nil {
		return sdk.Demotion{}, err
	}
	req.Params = in.params
	d, err := c.Verdict(ctx, id, req)
	if errors.Is(err, host.ErrNoVerdictHook) {
		in.cfg.mu.Lock()
		in.cfg.noHook = true
		in.cfg.mu.Unlock()
	}
	return d, err
}

// Kill stops the adapter's process abruptly (tests use it to simulate a
// crash); the next call relaunches it and configures its instances again.
func (in *Instance) Kill() { in.cfg.proc.kill() }

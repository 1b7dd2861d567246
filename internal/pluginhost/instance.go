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
	"github.com/verifierd/verifierd/sdk/plugin"
)

// Instance is one configured adapter. Its methods relaunch and reconfigure
// the adapter if its process has died since the last call; a call that was
// in flight when it died fails with an error wrapping ErrPluginShutdown and
// is not retried, so that the caller records the read as unavailable.
type Instance struct {
	host     *Host
	spec     Spec
	logger   hclog.Logger
	lastUsed time.Time

	mu         sync.Mutex
	c          conn
	info       plugin.Info
	failures   int
	nextLaunch time.Time
	// noHook is set once the adapter answered that it has no Verdict hook,
	// so later verdicts skip the round trip.
	noHook bool
	// relaunch is set when the adapter exited and is not running again
	// yet, so that its next start counts as a restart.
	relaunch bool
}

// Backoff between failed launches of one instance.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// ensure launches and configures the adapter unless it is running.
func (in *Instance) ensure(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.c != nil && !exited(in.c) {
		return nil
	}
	if in.c != nil {
		in.logger.Warn("adapter process exited; relaunching")
		in.host.opts.Events.PluginCrashed(in.spec.Kind)
		stopConn(in.c)
		in.c = nil
		in.relaunch = true
	}
	if wait := in.nextLaunch.Sub(in.host.now()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("adapter %s: waiting to relaunch: %w", in.spec.Kind, ctx.Err())
		case <-t.C:
		}
	}
	c, info, err := in.start(ctx)
	if err != nil {
		in.failures++
		backoff := min(firstBackoff<<min(in.failures-1, 10), maxBackoff)
		in.nextLaunch = in.host.now().Add(backoff)
		return err
	}
	in.c, in.info, in.failures = c, info, 0
	if in.relaunch {
		in.relaunch = false
		in.host.opts.Events.PluginRestarted(in.spec.Kind)
	}
	return nil
}

func (in *Instance) start(ctx context.Context) (conn, plugin.Info, error) {
	kind := in.spec.Kind
	c, err := in.host.launch(kind, in.logger)
	if err != nil {
		return nil, plugin.Info{}, err
	}
	fail := func(err error) (conn, plugin.Info, error) {
		stopConn(c)
		return nil, plugin.Info{}, err
	}
	info, err := c.GetInfo(ctx)
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
	version, err := plugin.NegotiateAPIVersion(info.APIVersions)
	if err != nil {
		return fail(fmt.Errorf("adapter %s: %w", kind, err))
	}
	err = c.Configure(ctx, sdk.ConfigureRequest{
		Kind:          kind,
		Config:        in.spec.ConfigJSON,
		Params:        in.spec.Params,
		Secrets:       in.spec.Secrets,
		EffectTimeout: in.spec.EffectTimeout,
		APIVersion:    version,
	})
	if err != nil {
		if ce, ok := errors.AsType[*sdk.ConfigError](err); ok {
			return fail(ce)
		}
		return fail(fmt.Errorf("adapter %s: configure: %w", kind, err))
	}
	// The tier may depend on the configuration (onscreen: re-opening the
	// record is tier 3, reading the save's own screen tier 4). Ask again
	// and keep the weaker answer, and never one stronger than the kind's
	// floor: a configuration can weaken a tier, never strengthen it.
	after, err := c.GetInfo(ctx)
	if err != nil {
		return fail(fmt.Errorf("adapter %s: get info after configure: %w", kind, err))
	}
	if !after.Tier.Valid() {
		return fail(fmt.Errorf("adapter %s declares tier %d after configure; a tier is 1 to 4", kind, after.Tier))
	}
	info.Tier = max(info.Tier, after.Tier, b.Tier) // b.Tier is 0 for a customer kind
	return c, info, nil
}

// client returns the running adapter, relaunching it if it died.
func (in *Instance) client(ctx context.Context) (conn, error) {
	if err := in.ensure(ctx); err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.c, nil
}

// Info returns what the adapter declared.
func (in *Instance) Info() sdk.Info {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.info.Info
}

// Kind is the adapter's kind.
func (in *Instance) Kind() string { return in.spec.Kind }

// Pid is the adapter's process id (0 in process or when not running).
func (in *Instance) Pid() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.c == nil {
		return 0
	}
	return pid(in.c)
}

// TestConnection runs the adapter's preflight.
func (in *Instance) TestConnection(ctx context.Context) (sdk.TestResult, error) {
	c, err := in.client(ctx)
	if err != nil {
		return sdk.TestResult{}, err
	}
	return c.TestConnection(ctx)
}

// CaptureBefore starts a baseline read.
func (in *Instance) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (*plugin.Capture, error) {
	c, err := in.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.CaptureBefore(ctx, req)
}

// CaptureAfter starts an after read.
func (in *Instance) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (*plugin.Capture, error) {
	c, err := in.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.CaptureAfter(ctx, req)
}

// Verdict calls the adapter's optional demotion hook. It returns
// plugin.ErrNoVerdictHook (wrapped) when the adapter has none.
func (in *Instance) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	in.mu.Lock()
	noHook := in.noHook
	in.mu.Unlock()
	if noHook {
		return sdk.Demotion{}, fmt.Errorf("adapter %s: %w", in.spec.Kind, plugin.ErrNoVerdictHook)
	}
	c, err := in.client(ctx)
	if err != nil {
		return sdk.Demotion{}, err
	}
	d, err := c.Verdict(ctx, req)
	if errors.Is(err, plugin.ErrNoVerdictHook) {
		in.mu.Lock()
		in.noHook = true
		in.mu.Unlock()
	}
	return d, err
}

// Kill stops the adapter process abruptly (tests use it to simulate a
// crash); the next call relaunches it.
func (in *Instance) Kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.c != nil {
		stopConn(in.c)
	}
}

func (in *Instance) stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.c != nil {
		stopConn(in.c)
		in.c = nil
	}
}

package uireadback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
)

// ExecPaths are where the adapter looks for Chromium, in order, when
// BrowserOptions.ExecPath is empty. Debian's /usr/bin/chromium is a shell
// wrapper, so the binary itself comes first.
var ExecPaths = []string{
	"/usr/lib/chromium/chromium",
	"/usr/bin/chromium",
	"/usr/lib/chromium-browser/chromium-browser",
	"/usr/bin/chromium-browser",
	"/opt/google/chrome/chrome",
	"/usr/bin/google-chrome",
}

// DefaultIdleTimeout is how long a pooled browser stays up with no
// read-back running.
const DefaultIdleTimeout = 2 * time.Minute

// startTimeout bounds a Chromium start.
const startTimeout = 30 * time.Second

// tempPrefix names the temporary folder of each browser process (its HOME,
// XDG folders and profile); the adapter's process id follows, so a later
// start can remove the folders of adapters that were killed.
const tempPrefix = "verifierd-uireadback-"

// BrowserOptions configure a Browser.
type BrowserOptions struct {
	// ExecPath is the Chromium binary; empty searches ExecPaths.
	ExecPath string
	// IdleTimeout stops the browser process after this long without a
	// read-back; 0 means DefaultIdleTimeout, a negative value never.
	IdleTimeout time.Duration
	// NoSpare opens each read-back's browser context when the read-back
	// starts, instead of opening the next one as the previous read ends.
	NoSpare bool
}

// Browser is one headless Chromium process that read-backs share. It starts
// on the first read-back, restarts if it died, and stops when idle. Each
// read-back runs in a brand-new browser context of it (an off-the-record
// profile: no cookies, storage, cache or service workers from any other
// context), which is disposed of when the read-back ends; the process is
// shared, the state never is. The context for the next read-back is opened
// when the previous one ends (see tab), which takes the context creation
// off the read-back's path.
type Browser struct {
	opts BrowserOptions

	mu       sync.Mutex
	proc     *browserProcess
	starting *startCall // the Chromium start in progress, if any
	spare    *tab       // the next read-back's tab, opening or open
	active   int
	idle     *time.Timer
	closed   bool
}

type browserProcess struct {
	ctx         context.Context // chromedp context that owns the browser
	cancel      context.CancelFunc
	allocCancel context.CancelFunc
	dir         string
	// tabs counts the tabs opened in this process and not yet disposed of.
	tabs sync.WaitGroup
}

// NewBrowser returns a Browser; no process starts until a read-back needs it.
func NewBrowser(opts BrowserOptions) *Browser {
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	return &Browser{opts: opts}
}

// errBrowserClosed is returned by acquire after Close.
var errBrowserClosed = errors.New("ui_readback: the browser was closed")

// tab is one brand-new browser context with one blank tab, for exactly one
// read-back. It may be opened ahead of the read-back that takes it (the
// spare), so that the read does not wait for the context to be created; it
// has loaded nothing but about:blank until then.
type tab struct {
	ctx      context.Context // chromedp context of the tab
	cancel   context.CancelFunc
	proc     *browserProcess
	listener atomic.Pointer[func(ev any)]
	opened   chan struct{}
	err      error // set before opened closes
	disposed sync.Once
}

// openTab starts opening a tab in p; the caller holds the Browser's lock,
// so p is current and cannot be stopping.
func openTab(p *browserProcess) *tab {
	t := &tab{proc: p, opened: make(chan struct{})}
	p.tabs.Add(1)
	t.ctx, t.cancel = chromedp.NewContext(p.ctx, chromedp.WithNewBrowserContext(), chromedp.WithListener(t.dispatch))
	go func() {
		// The first run ties the tab's life to t.ctx.
		t.err = chromedp.Do(t.ctx)
		close(t.opened)
	}()
	return t
}

// dispatch hands the tab's events to the read-back that took it.
func (t *tab) dispatch(ev any) {
	if f := t.listener.Load(); f != nil {
		(*f)(ev)
	}
}

// wait blocks until the tab is open.
func (t *tab) wait(ctx context.Context) error {
	select {
	case <-t.opened:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tabCloseWait bounds closing a read-back's tab.
const tabCloseWait = 5 * time.Second

// dispose closes the tab and disposes of its browser context, with every
// cookie, storage and cache entry in it, in the background, so that a
// capture answers without waiting for it. guard is the network guard of
// the read-back that used the tab (nil for a spare never used); report
// gets what went wrong while closing (nil: nothing is reported).
func (t *tab) dispose(guard *cdpguard.Network, report func(error)) {
	t.disposed.Do(func() {
		go func() {
			defer t.proc.tabs.Done()
			// A tab still opening is closed once open, or it would be
			// left behind; closed while the guards hold; the cancel then
			// disposes of the browser context.
			select {
			case <-t.opened:
			case <-time.After(tabCloseWait):
			}
			if err := cdpguard.CloseTab(t.ctx, guard, tabCloseWait); err != nil && report != nil {
				report(err)
			}
			t.cancel()
		}()
	})
}

// discard lets go of a tab no read-back took (the spare: about:blank,
// no guards), when its browser process stops: there is nothing in it for
// the guards to answer, and a close through CloseTab would wait out its
// budgets on a browser that is going away.
func (t *tab) discard() {
	t.disposed.Do(func() {
		t.cancel()
		t.proc.tabs.Done()
	})
}

// acquire returns a fresh tab in the running browser, starting the browser
// when needed, and a release func the caller must call when its read-back
// ends. The caller disposes of the tab. The lock is never held while
// Chromium starts: one start runs at a time (startOnce), and every
// acquirer that needs it waits for that one, each until its own context
// ends (then acquire returns ctx.Err() at once; the start goes on for the
// others, and a browser nobody took stops when idle).
func (b *Browser) acquire(ctx context.Context) (*tab, func(), error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, nil, errBrowserClosed
		}
		if b.proc != nil && b.proc.ctx.Err() != nil {
			// The process died (crash, kill): start a new one.
			b.stopLocked()
		}
		if b.proc != nil {
			t, release := b.takeLocked()
			b.mu.Unlock()
			return t, release, nil
		}
		s := b.startOnceLocked()
		b.mu.Unlock()
		select {
		case <-s.done:
			if s.err != nil {
				return nil, nil, s.err
			}
			// Started: take a tab of it (or start again, had it died).
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// startCall is one Chromium start that acquirers wait for: done closes
// when it has ended, err is set before.
type startCall struct {
	done chan struct{}
	err  error
}

// startOnceLocked is the start in progress, or a new one; the caller holds
// the lock.
func (b *Browser) startOnceLocked() *startCall {
	if b.starting == nil {
		b.starting = &startCall{done: make(chan struct{})}
		go b.runStart(b.starting)
	}
	return b.starting
}

// runStart starts Chromium without the lock, bounded by startTimeout and
// by no acquirer's context, and makes it the running browser: idle at
// first, so that a browser no acquirer stayed for stops like any other.
func (b *Browser) runStart(s *startCall) {
	p, err := b.start(context.Background())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.starting = nil
	switch {
	case err != nil:
		s.err = err
	case b.closed:
		go p.stop()
		s.err = errBrowserClosed
	default:
		b.proc = p
		b.armIdleLocked()
	}
	close(s.done)
}

// takeLocked takes a tab of the running browser for one read-back; the
// caller holds the lock.
func (b *Browser) takeLocked() (*tab, func()) {
	if b.idle != nil {
		b.idle.Stop()
		b.idle = nil
	}
	b.active++
	t := b.spare
	b.spare = nil
	if t == nil {
		t = openTab(b.proc)
	}
	var once sync.Once
	return t, func() { once.Do(b.release) }
}

// armIdleLocked stops the browser after IdleTimeout when no read-back runs
// in it; the caller holds the lock.
func (b *Browser) armIdleLocked() {
	if b.active == 0 && b.opts.IdleTimeout > 0 {
		if b.idle != nil {
			b.idle.Stop()
		}
		b.idle = time.AfterFunc(b.opts.IdleTimeout, b.stopIdle)
	}
}

// waitSpare waits until the next read-back's tab is open (for benchmarks
// that measure a read whose context is ready, as between two captures).
func (b *Browser) waitSpare(ctx context.Context) error {
	b.mu.Lock()
	t := b.spare
	b.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.wait(ctx)
}

// release ends a read-back: the next spare starts opening now, when no
// read-back competes with it for the machine.
func (b *Browser) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	if b.closed || b.proc == nil || b.proc.ctx.Err() != nil {
		return
	}
	if b.spare == nil && !b.opts.NoSpare {
		b.spare = openTab(b.proc)
	}
	b.armIdleLocked()
}

func (b *Browser) stopIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == 0 {
		b.stopLocked()
	}
}

// stopLocked stops the process in the background; a read-back still
// running in it (after Close) fails as the browser goes.
func (b *Browser) stopLocked() {
	if b.spare != nil {
		b.spare.discard()
		b.spare = nil
	}
	if b.proc != nil {
		go b.proc.stop()
		b.proc = nil
	}
}

// Close stops the browser process and removes its temporary folder. A
// Browser cannot be used after Close.
func (b *Browser) Close() error {
	b.mu.Lock()
	b.closed = true
	if b.idle != nil {
		b.idle.Stop()
	}
	if b.spare != nil {
		b.spare.discard()
		b.spare = nil
	}
	p := b.proc
	b.proc = nil
	b.mu.Unlock()
	if p != nil {
		p.stop()
	}
	return nil
}

// kill is Close for a process that is ending: it ends Chromium at once,
// without its graceful close or the wait for tabs, and removes the
// browser's folder. The daemon stops a plugin by asking it to exit and
// SIGKILLs it 2 s later (go-plugin); on a loaded machine the graceful
// close took longer, and the profile outlived the plugin.
func (b *Browser) kill() {
	b.mu.Lock()
	b.closed = true
	if b.idle != nil {
		b.idle.Stop()
	}
	b.spare = nil
	p := b.proc
	b.proc = nil
	b.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Pid is the browser's process id, or 0 when none runs.
func (b *Browser) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	c := chromedp.FromContext(b.proc.ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return 0
	}
	return c.Browser.Process().Pid
}

func (b *Browser) execPath() (string, error) {
	if b.opts.ExecPath != "" {
		return b.opts.ExecPath, nil
	}
	for _, p := range ExecPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("ui_readback: no Chromium found (looked for %s); install Debian's chromium package", strings.Join(ExecPaths, ", "))
}

// start launches Chromium headless with a profile, HOME and XDG folders of
// its own under a fresh temporary folder. Adapters run with an empty
// environment, so the browser gets exactly these variables and nothing else.
func (b *Browser) start(ctx context.Context) (*browserProcess, error) {
	path, err := b.execPath()
	if err != nil {
		return nil, err
	}
	removeStaleTempDirs()
	dir, err := os.MkdirTemp("", tempPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("ui_readback: a temporary folder for the browser: %w", err)
	}
	env := []string{"HOME=" + dir, "TMPDIR=" + os.TempDir()}
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"} {
		sub := filepath.Join(dir, strings.ToLower(strings.TrimPrefix(v, "XDG_")))
		if err := os.Mkdir(sub, 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("ui_readback: %w", err)
		}
		env = append(env, v+"="+sub)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoInheritEnv,
		chromedp.Env(env...),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// Nothing may talk to the network but the pages a read-back opens.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		// Popups stay blocked: a popup is a tab the guards are not in.
		chromedp.Flag("disable-popup-blocking", false),
		chromedp.Flag("mute-audio", true),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp's own log lines can quote protocol messages, which carry page
	// content; they are dropped rather than sent to the daemon's log.
	quiet := func(string, ...any) {}
	bctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(quiet), chromedp.WithErrorf(quiet))
	p := &browserProcess{ctx: bctx, cancel: cancel, allocCancel: allocCancel, dir: dir}

	// The first run ties the browser's life to bctx, so it gets bctx itself;
	// ctx and startTimeout bound the wait instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case err = <-started:
	case <-t.C:
		err = fmt.Errorf("it did not answer within %v", startTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("ui_readback: starting Chromium (%s): %w", path, err)
	}
	return p, nil
}

// stopTabsWait bounds the wait, when a browser process stops, for its tabs
// to be let go. Stopping ends the browser first, so a tab's close can only
// time out by then; the process's folder must not wait for that.
const stopTabsWait = time.Second

// stop stops Chromium, which ends every tab's context and so every
// read-back still running in it, waits (stopTabsWait at most) for the tabs
// to be let go, ends the process and removes the process's folder.
func (p *browserProcess) stop() {
	p.cancel()
	let := make(chan struct{})
	go func() {
		p.tabs.Wait()
		close(let)
	}()
	t := time.NewTimer(stopTabsWait)
	select {
	case <-let:
	case <-t.C:
	}
	t.Stop()
	p.allocCancel()
	removeDir(p.dir)
}

// kill ends the process at once (the allocator's cancel kills Chromium
// and its leftover children and waits for them) and removes its folder
// first of all; the browser context is let go in the background, as the
// plugin process is ending.
func (p *browserProcess) kill() {
	p.allocCancel()
	removeDir(p.dir)
	go p.cancel()
}

// removeDir removes a browser's folder, trying again for a moment while a
// browser process that is ending still writes into it.
func removeDir(dir string) {
	for range 20 {
		if err := os.RemoveAll(dir); err == nil {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeStaleTempDirs removes the temporary folders of adapter processes
// that no longer run (a killed plugin cannot clean up after itself).
func removeStaleTempDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), tempPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if processGone(pid) {
			os.RemoveAll(m)
		}
	}
}

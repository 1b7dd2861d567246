package pluginhost

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// blockingStart makes h's launches of kind wait until release is closed
// (a real blocking start: the launch is inside startConn when entered is
// closed), and launch through l otherwise.
func blockingStart(h *Host, l *launcher, kind string) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.startConn = func(k string, logger hclog.Logger) (conn, error) {
		if k == kind {
			once.Do(func() { close(entered) })
			<-release
		}
		return l.start(k, logger)
	}
	return entered, release
}

// TestSlowStartBlocksNoOne: while one kind's process is starting, another
// kind serves captures, PluginPids answers, a second caller of the
// starting kind whose context ends gets its context's error at once (and
// launches nothing), and the start completes for its own caller.
func TestSlowStartBlocksNoOne(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "slow", "fast")
	entered, release := blockingStart(h, l, "slow")

	type answer struct {
		in  *Instance
		err error
	}
	first := make(chan answer, 1)
	go func() {
		in, err := h.Instance(t.Context(), spec("slow", "s1"))
		first <- answer{in, err}
	}()
	<-entered

	fast, err := h.Instance(t.Context(), spec("fast", "f1"))
	if err != nil {
		t.Fatalf("another kind while one starts: %v", err)
	}
	if got := readID(t, fast); got != "f1" {
		t.Errorf("fast read %q, want f1", got)
	}
	if pids := h.PluginPids(); len(pids) != 0 {
		t.Errorf("PluginPids = %v; in-process adapters have no pid", pids)
	}

	// Same configuration (the waiter meets the starter in ensure) and
	// another configuration of the same kind.
	for _, s := range []Spec{spec("slow", "s2"), cfgSpec("slow", "other")} {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := h.Instance(ctx, s)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for its process to start") {
			t.Errorf("a waiter whose context ended = %v; want context.Canceled while waiting for the start", err)
		}
	}

	close(release)
	got := <-first
	if got.err != nil {
		t.Fatalf("the slow start: %v", got.err)
	}
	if id := readID(t, got.in); id != "s1" {
		t.Errorf("slow read %q, want s1", id)
	}
	if n := l.count("slow"); n != 1 {
		t.Errorf("%d launches of slow, want 1: waiters launch nothing", n)
	}
	// A waiter that waits (its context lives) gets the started process.
	in, err := h.Instance(t.Context(), cfgSpec("slow", "later"))
	if err != nil {
		t.Fatal(err)
	}
	if id := readID(t, in); id != "later" {
		t.Errorf("slow read %q, want later", id)
	}
	if n := l.count("slow"); n != 1 {
		t.Errorf("%d launches of slow, want 1", n)
	}
}

// TestCloseDuringAStart: Close does not wait for a start under way; the
// start's caller is refused when it completes and no process is left.
func TestCloseDuringAStart(t *testing.T) {
	t.Parallel()
	l, clk := &launcher{}, &clock{t: time.Unix(1e9, 0)}
	h := newHost(t, Options{}, l, clk, "slow")
	entered, release := blockingStart(h, l, "slow")
	first := make(chan error, 1)
	var in *Instance
	go func() {
		var err error
		in, err = h.Instance(t.Context(), spec("slow", "s1"))
		first <- err
	}()
	<-entered
	h.mu.Lock()
	p := h.procs["slow"]
	h.mu.Unlock()
	h.Close()
	close(release)
	if err := <-first; err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("a start Close overtook = %v (instance %v); want a shutting-down refusal", err, in != nil)
	}
	p.mu.Lock()
	running := p.c != nil
	p.mu.Unlock()
	if running {
		t.Error("the process started after Close was kept")
	}
	if n := l.count("slow"); n != 1 {
		t.Errorf("%d launches, want 1", n)
	}
}

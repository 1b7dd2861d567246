package uireadback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gatedChromium writes a Chromium that waits for a gate file before it
// starts (a start that takes as long as the test wants), counting its
// starts in a file; it returns the wrapper's path, the gate's and the
// count's.
func gatedChromium(t *testing.T) (exe, gate, count string) {
	t.Helper()
	needChromium(t)
	br := NewBrowser(BrowserOptions{})
	real, err := br.execPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exe, gate, count = filepath.Join(dir, "chromium"), filepath.Join(dir, "gate"), filepath.Join(dir, "starts")
	script := fmt.Sprintf("#!/bin/sh\necho start >> '%s'\nwhile [ ! -e '%s' ]; do sleep 0.05; done\nexec '%s' \"$@\"\n", count, gate, real)
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, gate, count
}

// TestAcquireWaitsOutsideTheLock: while Chromium starts for one reader,
// a second reader whose context ends returns its context's error at once,
// the start still in progress; a third reader waits for the same start
// instead of starting another, and both it and the first get a tab of the
// one browser.
func TestAcquireWaitsOutsideTheLock(t *testing.T) {
	exe, gate, count := gatedChromium(t)
	br := NewBrowser(BrowserOptions{ExecPath: exe, IdleTimeout: -1})
	defer br.Close()
	type got struct {
		tab *tab
		err error
	}
	acquire := func(ctx context.Context) chan got {
		ch := make(chan got, 1)
		go func() {
			tb, release, err := br.acquire(ctx)
			if err == nil {
				defer release()
				tb.discard()
			}
			ch <- got{tb, err}
		}()
		return ch
	}
	first := acquire(context.Background())
	waitStarting(t, br)
	ctx, cancel := context.WithCancel(context.Background())
	second := acquire(ctx)
	third := acquire(context.Background())
	cancel()
	select {
	case g := <-second:
		if !errors.Is(g.err, context.Canceled) {
			t.Fatalf("the reader whose context ended: %v, want %v", g.err, context.Canceled)
		}
	case <-time.After(time.Minute):
		t.Fatal("the reader whose context ended was still waiting a minute later")
	}
	if !starting(br) {
		t.Fatal("the start was no longer in progress when the second reader returned")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan got{"first": first, "third": third} {
		if g := <-ch; g.err != nil {
			t.Errorf("the %s reader: %v", name, g.err)
		}
	}
	raw, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "start"); n != 1 {
		t.Errorf("Chromium started %d times for three readers, want 1", n)
	}
}

// starting reports whether a Chromium start is in progress.
func starting(b *Browser) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starting != nil
}

// waitStarting waits (a minute at most) until a start is in progress.
func waitStarting(t *testing.T, b *Browser) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !starting(b) {
		if time.Now().After(deadline) {
			t.Fatal("no Chromium start in progress after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

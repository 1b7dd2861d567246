package judge

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock advances its time only when Poll sleeps.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// script returns a check that yields the given decisions in order (the last
// one repeats), each verdict tagged with its read number.
func script(decisions ...Decision) (func(context.Context) Verdict, *int) {
	calls := new(int)
	return func(context.Context) Verdict {
		d := decisions[min(*calls, len(decisions)-1)]
		*calls++
		v := Verdict{Decision: d, Reasons: []Reason{{Code: "READ", Message: fmt.Sprint(*calls)}}}
		switch d {
		case Confirmed:
			v.ObservedCount, v.ExpectedCount = new(1), new(1)
		case Refuted:
			v.ObservedCount, v.ExpectedCount = new(0), new(1)
		}
		v.Class = Classify(&v, Options{})
		return v
	}, calls
}

func TestPollAtLeastOneRead(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{0, -time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			check, calls := script(Refuted)
			v := Poll(context.Background(), clock, PollOptions{Timeout: timeout}, check)
			if *calls != 1 {
				t.Errorf("reads = %d, want exactly 1", *calls)
			}
			if v.Decision != Refuted || v.Reasons[0].Message != "1" {
				t.Errorf("verdict %s %v, want the one read's REFUTED", v.Decision, v.Reasons)
			}
			if len(clock.slept()) != 0 {
				t.Errorf("slept %v with no time to wait", clock.slept())
			}
		})
	}
}

func TestPollFirstConfirmed(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	check, calls := script(Refuted, Indeterminate, Confirmed, Refuted)
	v := Poll(context.Background(), clock, PollOptions{Timeout: 10 * time.Second, Interval: 100 * time.Millisecond}, check)
	if v.Decision != Confirmed || v.Reasons[0].Message != "3" {
		t.Errorf("verdict %s %v, want the third read's CONFIRMED", v.Decision, v.Reasons)
	}
	if *calls != 3 {
		t.Errorf("reads = %d, want 3 (no read after the first CONFIRMED)", *calls)
	}
}

func TestPollConfirmedAtOnce(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	check, calls := script(Confirmed)
	v := Poll(context.Background(), clock, PollOptions{Timeout: 10 * time.Second}, check)
	if v.Decision != Confirmed || *calls != 1 || len(clock.slept()) != 0 {
		t.Errorf("verdict %s after %d reads and sleeps %v, want CONFIRMED after 1 read, no sleep", v.Decision, *calls, clock.slept())
	}
}

func TestPollGrowingIntervalsAndTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		opts              PollOptions
		last              Decision
		wantCap           time.Duration
		firstWait         time.Duration
		decisionsSequence []Decision
	}{
		{"explicit", PollOptions{Timeout: 10 * time.Second, Interval: 100 * time.Millisecond, MaxInterval: time.Second}, Refuted, time.Second, 100 * time.Millisecond, []Decision{Refuted}},
		{"defaults", PollOptions{Timeout: 5 * time.Second}, Indeterminate, time.Second, 0, []Decision{Indeterminate}},
		{"small cap", PollOptions{Timeout: 3 * time.Second, Interval: 50 * time.Millisecond, MaxInterval: 200 * time.Millisecond}, Refuted, 200 * time.Millisecond, 50 * time.Millisecond, []Decision{Refuted, Indeterminate, Refuted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			start := clock.Now()
			check, calls := script(tc.decisionsSequence...)
			v := Poll(context.Background(), clock, tc.opts, check)
			sleeps := clock.slept()
			if len(sleeps) < 3 {
				t.Fatalf("sleeps %v: too few re-reads", sleeps)
			}
			if tc.firstWait > 0 && sleeps[0] != tc.firstWait {
				t.Errorf("first wait %v, want %v", sleeps[0], tc.firstWait)
			}
			// Every wait but the last (which may be cut to the deadline)
			// grows until it reaches the cap, then stays there.
			capped := false
			for i := 1; i < len(sleeps)-1; i++ {
				switch {
				case sleeps[i] > tc.wantCap:
					t.Errorf("wait %d = %v exceeds the cap %v (%v)", i, sleeps[i], tc.wantCap, sleeps)
				case sleeps[i] == tc.wantCap:
					capped = true
				case capped:
					t.Errorf("wait %d = %v shrank after reaching the cap (%v)", i, sleeps[i], sleeps)
				case sleeps[i] <= sleeps[i-1]:
					t.Errorf("wait %d = %v does not grow from %v (%v)", i, sleeps[i], sleeps[i-1], sleeps)
				}
			}
			if !capped {
				t.Errorf("waits never reached the cap %v: %v", tc.wantCap, sleeps)
			}
			var total time.Duration
			for _, s := range sleeps {
				total += s
			}
			if total != tc.opts.Timeout || !clock.Now().Equal(start.Add(tc.opts.Timeout)) {
				t.Errorf("polled for %v, want exactly the timeout %v", total, tc.opts.Timeout)
			}
			if *calls != len(sleeps)+1 {
				t.Errorf("reads %d, sleeps %d: want one read after each sleep", *calls, len(sleeps))
			}
			if v.Decision != tc.last || v.Reasons[0].Message != fmt.Sprint(*calls) {
				t.Errorf("returned %s %v, want the last read (%d), %s", v.Decision, v.Reasons, *calls, tc.last)
			}
		})
	}
}

func TestPollSettle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		decisions []Decision
		settle    time.Duration
		want      Decision
		wantRead  string
		minReads  int
	}{
		{"late duplicate caught", []Decision{Refuted, Confirmed, Confirmed, Refuted, Confirmed}, 5 * time.Second, Refuted, "4", 4},
		{"vanished write caught", []Decision{Confirmed, Indeterminate}, 5 * time.Second, Indeterminate, "2", 2},
		{"settle completes", []Decision{Confirmed}, 2 * time.Second, Confirmed, "", 3},
		{"settle past the timeout", []Decision{Refuted, Refuted, Confirmed}, 3 * time.Second, Confirmed, "", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			start := clock.Now()
			check, calls := script(tc.decisions...)
			opts := PollOptions{Timeout: 200 * time.Millisecond, Settle: tc.settle, Interval: 100 * time.Millisecond, MaxInterval: 500 * time.Millisecond}
			v := Poll(context.Background(), clock, opts, check)
			if v.Decision != tc.want {
				t.Errorf("decision %s (%v), want %s", v.Decision, v.Reasons, tc.want)
			}
			if tc.wantRead != "" && v.Reasons[0].Message != tc.wantRead {
				t.Errorf("returned read %s, want read %s", v.Reasons[0].Message, tc.wantRead)
			}
			if *calls < tc.minReads {
				t.Errorf("reads %d, want at least %d", *calls, tc.minReads)
			}
			if tc.want == Confirmed {
				// The whole settle window was watched.
				if clock.Now().Sub(start) < tc.settle {
					t.Errorf("returned CONFIRMED after %v, before the %v settle window ended", clock.Now().Sub(start), tc.settle)
				}
			}
		})
	}
}

func TestPollSettleInterrupted(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	check := func(context.Context) Verdict {
		reads++
		if reads == 2 {
			cancel() // the caller gives up inside the settle window
		}
		v := Verdict{Decision: Confirmed, ObservedCount: new(1), ExpectedCount: new(1), ContractHash: "sha256:x",
			Reasons: []Reason{{Code: ReasonCountExact, Message: "found exactly 1"}}}
		v.Class = Classify(&v, Options{})
		return v
	}
	v := Poll(ctx, clock, PollOptions{Timeout: time.Second, Settle: 10 * time.Second, Interval: 100 * time.Millisecond}, check)
	got := summarize(v)
	want := indet(ClassIndeterminate, ReasonSettleInterrupted)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if v.ContractHash != "sha256:x" {
		t.Errorf("contract hash lost: %q", v.ContractHash)
	}
	if OutcomeOf([]Verdict{v}) == Verified {
		t.Errorf("an interrupted settle window verified the step")
	}
}

// A context cancelled before any settle window returns the last verdict, never a pass.
func TestPollCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	reads := 0
	check := func(context.Context) Verdict {
		reads++
		cancel()
		v := Verdict{Decision: Refuted, ObservedCount: new(0), ExpectedCount: new(1)}
		v.Class = Classify(&v, Options{})
		return v
	}
	v := Poll(ctx, clock, PollOptions{Timeout: 10 * time.Second}, check)
	if v.Decision != Refuted || reads != 1 {
		t.Errorf("decision %s after %d reads, want REFUTED after 1", v.Decision, reads)
	}
}

// A group settles only when every verdict is CONFIRMED, and returns the
// verdicts of the read that decided it, each with its own contract hash.
func TestPollGroup(t *testing.T) {
	t.Parallel()
	mk := func(hash string, d Decision) Verdict { return Verdict{Decision: d, ContractHash: hash} }
	reads := [][]Verdict{
		{mk("a", Confirmed), mk("b", Refuted)},
		{mk("a", Confirmed), mk("b", Confirmed)},
		{mk("a", Confirmed), mk("b", Refuted)}, // a late change inside the settle window
	}
	calls := 0
	check := func(context.Context) []Verdict { v := reads[min(calls, len(reads)-1)]; calls++; return v }

	got := PollGroup(context.Background(), newFakeClock(), PollOptions{Timeout: 5 * time.Second, Interval: 100 * time.Millisecond}, check)
	if calls != 2 || got[0].Decision != Confirmed || got[1].Decision != Confirmed {
		t.Fatalf("no settle: %d reads, %v", calls, got)
	}
	calls = 0
	got = PollGroup(context.Background(), newFakeClock(), PollOptions{Timeout: 5 * time.Second, Settle: time.Second, Interval: 100 * time.Millisecond}, check)
	if calls != 3 || got[1].Decision != Refuted || got[1].ContractHash != "b" {
		t.Fatalf("settle: %d reads, %v; want the third read's REFUTED b", calls, got)
	}

	// A cut-short settle window demotes every CONFIRMED of the group.
	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	allOK := func(context.Context) []Verdict {
		calls++
		cancel()
		return []Verdict{mk("a", Confirmed), mk("b", Confirmed)}
	}
	got = PollGroup(ctx, newFakeClock(), PollOptions{Timeout: 5 * time.Second, Settle: time.Second}, allOK)
	for i, v := range got {
		if v.Decision != Indeterminate || v.Class != ClassIndeterminate || len(v.Reasons) != 1 || v.Reasons[0].Code != ReasonSettleInterrupted || v.ContractHash != []string{"a", "b"}[i] {
			t.Errorf("interrupted verdict %d = %+v", i, v)
		}
	}
}

// TestPollStopsOnAccessRejected: a read whose system of record rejected the
// reader's credential ends the settlement loop at once, with no wait and
// no read after it, also inside a settle window; other INDETERMINATE reads
// are read again until the timeout.
func TestPollStopsOnAccessRejected(t *testing.T) {
	t.Parallel()
	rejected := Verdict{Decision: Indeterminate, Reasons: []Reason{{Code: ReasonAccessRejected, Message: "rejected"}}}
	other := Verdict{Decision: Indeterminate, Reasons: []Reason{{Code: ReasonSORUnreachable, Message: "down"}}}
	ok := Verdict{Decision: Confirmed}
	tests := []struct {
		name  string
		reads [][]Verdict
		opts  PollOptions
		calls int
	}{
		{"first read", [][]Verdict{{ok, rejected}}, PollOptions{Timeout: 10 * time.Second}, 1},
		{"after an outage", [][]Verdict{{other, ok}, {other, other}, {rejected, other}, {ok, ok}}, PollOptions{Timeout: 10 * time.Second}, 3},
		{"inside the settle window", [][]Verdict{{ok, ok}, {ok, rejected}, {ok, ok}}, PollOptions{Timeout: 10 * time.Second, Settle: 5 * time.Second}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			calls := 0
			check := func(context.Context) []Verdict { v := tt.reads[min(calls, len(tt.reads)-1)]; calls++; return v }
			got := PollGroup(context.Background(), clock, tt.opts, check)
			if calls != tt.calls || !accessRejected(got) {
				t.Errorf("%d reads, %v; want %d, the rejected read's verdicts", calls, got, tt.calls)
			}
			if slept := clock.slept(); len(slept) != tt.calls-1 {
				t.Errorf("slept %v; want no wait after the rejected read", slept)
			}
		})
	}
	// An outage alone is read until the timeout.
	calls := 0
	PollGroup(context.Background(), newFakeClock(), PollOptions{Timeout: 2 * time.Second, Interval: 100 * time.Millisecond},
		func(context.Context) []Verdict { calls++; return []Verdict{other} })
	if calls < 3 {
		t.Errorf("an outage was read %d times in 2 s; want it read again", calls)
	}
}

package uireadback

import (
	"fmt"
	"sync"
	"time"
)

// defaultSignInHold is how long the gate holds when the daemon gave the
// instance no settlement window (ConfigureRequest.EffectTimeout).
const defaultSignInHold = time.Minute

// signInHold is how long a rejected credential is not tried again: the
// instance's settlement window, the longest timeout_s of the run, which is
// how long the daemon goes on reading after the automation acted.
func signInHold(effect time.Duration) time.Duration {
	if effect > 0 {
		return effect
	}
	return defaultSignInHold
}

// signInGate keeps one configured instance from signing in again with a
// credential the application rejected: an account that stopped working
// would otherwise be tried on every read the daemon makes while it waits
// for a write to settle (once a second or so), enough to lock it on most
// applications. After maxAttempts rejected sign-ins in a row it holds every
// sign-in for hold; the reads in that time answer at once, unusable, with
// the reason. A sign-in that fails for another reason (the page is down or
// slow, the browser failed) is not counted: the next read tries again. A
// sign-in that succeeds resets the count.
type signInGate struct {
	maxAttempts int
	hold        time.Duration
	now         func() time.Time

	mu       sync.Mutex
	rejected int       // rejected sign-ins in a row since the last success or hold
	last     time.Time // when the last one was rejected
	until    time.Time // no sign-in before this
}

func newSignInGate(maxAttempts int, hold time.Duration) *signInGate {
	return &signInGate{maxAttempts: max(maxAttempts, 1), hold: hold, now: time.Now}
}

// admit returns why a sign-in may not be tried now, or "".
func (g *signInGate) admit() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.now().Before(g.until) {
		return ""
	}
	return fmt.Sprintf("the application rejected the read-back account's credential at %s, and it is not tried again before %s (sign_in.max_attempts is %d) so that the application does not lock the account: restore the account's access (the user name and password its variables hold, or a locked or expired account)",
		g.last.UTC().Format(time.TimeOnly), g.until.UTC().Format(time.TimeOnly), g.maxAttempts)
}

// reject records a sign-in the application rejected and reports whether
// the gate now holds.
func (g *signInGate) reject() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = g.now()
	g.rejected++
	if g.rejected < g.maxAttempts {
		return false
	}
	g.rejected = 0
	g.until = g.last.Add(g.hold)
	return true
}

// succeeded records a sign-in that worked.
func (g *signInGate) succeeded() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rejected = 0
}

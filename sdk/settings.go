package sdk

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrNotConfigured is a call on an instance whose Configure has not
// succeeded: a fault of the caller, never a reading.
var ErrNotConfigured = errors.New("adapter called before Configure")

// Settings holds what an instance's Configure resolved (S: the adapter's
// own settings type), for its calls to load, safely for concurrent use.
// Configure stores it once; the calls load it. Defined holds one; an
// adapter that implements Adapter itself may too.
type Settings[S any] struct {
	p atomic.Pointer[S]
}

// Store keeps the settings Configure resolved.
func (s *Settings[S]) Store(v *S) { s.p.Store(v) }

// Swap stores v and returns the previous settings (nil at first).
func (s *Settings[S]) Swap(v *S) *S { return s.p.Swap(v) }

// Load returns the settings, or ErrNotConfigured.
func (s *Settings[S]) Load() (*S, error) {
	v := s.p.Load()
	if v == nil {
		return nil, ErrNotConfigured
	}
	return v, nil
}

// Binding is an adapter's binding of one call's run parameters into the
// value its reads use (a URL, a request body, the settings bound to the
// run), declared once. Embedded in the settings (or the Adapter) and set to
// their bind function, it answers CheckParams, so they are a ParamChecker
// without writing one, and Test binds before a TestConnection probes:
//
//	type settings struct {
//		sdk.Binding[*url.URL] // firstURL
//		...
//	}
//
//	func configure(ctx context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
//		s := &settings{}
//		s.Binding = s.firstURL
//		...
//	}
//
//	func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
//		return s.Test(ctx, req, s.probe)
//	}
type Binding[B any] func(params map[string]string) (B, error)

// CheckParams binds params as a call would, without reading, and returns
// the refusal (a *refusal.Error) that call would.
func (b Binding[B]) CheckParams(_ context.Context, params map[string]string) error {
	_, err := b.bind(params)
	return err
}

// Test is a TestConnection that binds req.Params first: a refusal is
// returned as the error, before anything is read; otherwise probe runs with
// the bound value and its answer is TestConnection's.
func (b Binding[B]) Test(ctx context.Context, req TestRequest, probe func(ctx context.Context, bound B) (TestResult, error)) (TestResult, error) {
	v, err := b.bind(req.Params)
	if err != nil {
		return TestResult{}, err
	}
	return probe(ctx, v)
}

// bind is b(params), or an error for a Binding never set.
func (b Binding[B]) bind(params map[string]string) (B, error) {
	if b == nil {
		var zero B
		return zero, errors.New("the adapter embeds sdk.Binding but never sets it to its bind function")
	}
	return b(params)
}

package sdk

import (
	"context"
	"errors"
	"io"
)

// Reader is what an adapter's configure function resolves (Define): the
// settings of one configured instance, which probe and read the system of
// record. They never change after configure returns; every method binds
// its call's run parameters (req.Params) into that call only, and must be
// safe for concurrent use.
//
// Define's adapter also takes up these when the settings implement them:
// ParamChecker (CheckParams binds a session's parameters without reading),
// TierReporter (a tier that depends on the configuration), AfterReader (a CaptureAfter that differs from the baseline read),
// VerdictHook (Verdict), and io.Closer (Close releases what configure
// opened, such as connection pools, once the daemon releases the instance
// or configures it again).
type Reader interface {
	// TestConnection is the adapter's TestConnection.
	TestConnection(ctx context.Context, req TestRequest) (TestResult, error)
	// Read reads the system of record afresh: it answers CaptureBefore
	// and, unless the settings are an AfterReader, CaptureAfter.
	Read(ctx context.Context, req CaptureRequest) (Capture, error)
}

// TierReporter is implemented by settings whose mechanism, and so their
// tier, depends on the configuration (onscreen: re-opening the record, or
// reading the screen the save left). Once Configure has stored them,
// Define's adapter answers Info with their tier when it is weaker than the
// Info it was given, never with a stronger one: a configuration can weaken
// a tier, never strengthen it (the daemon asks Info before and after
// Configure and keeps the weaker answer).
type TierReporter interface {
	Tier() Tier
}

// AfterReader is implemented by settings whose after-read differs from
// their baseline read (one that remembers what it read for a VerdictHook):
// ReadAfter answers CaptureAfter, Read still answers CaptureBefore.
type AfterReader interface {
	ReadAfter(ctx context.Context, req CaptureRequest) (Capture, error)
}

// Define returns the factory (for plugin.Serve, plugin.Main and
// adaptertest) of an adapter made of its parts: info, which Info answers,
// and configure, which turns the adapter's section, decoded into C with the
// SDK's strict decoder (ConfigureRequest.DecodeConfig; the kind checked is
// info.Kind when the request names none), into the settings R that every
// later call loads:
//
//	var New = sdk.Define(info, configure)
//
//	func configure(ctx context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error)
//	func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error)
//	func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error)
//
// A call before a successful Configure returns ErrNotConfigured. The
// adapter always answers CheckParams (nil when the settings are no
// ParamChecker, which is what the daemon makes of an adapter without it)
// and Close; it is a VerdictHook only when the settings are one, and its
// CaptureAfter is the settings' ReadAfter when they have one. An adapter that
// keeps state outside its settings, or configures in a way this does not
// fit, implements Adapter itself (Settings and Binding help).
func Define[C, S any, R interface {
	*S
	Reader
}](info Info, configure func(ctx context.Context, cfg C, req ConfigureRequest) (R, error)) func() Adapter {
	resolve := func(ctx context.Context, req ConfigureRequest) (*S, error) {
		kind := req.Kind
		if kind == "" {
			kind = info.Kind
		}
		var cfg C
		if err := decodeConfig(kind, req.Config, &cfg); err != nil {
			return nil, err
		}
		r, err := configure(ctx, cfg, req)
		if err == nil && r == nil {
			err = errors.New("the adapter's configure returned neither settings nor an error")
		}
		return (*S)(r), err
	}
	reader := func(s *S) Reader { return R(s) }
	_, hook := any(R(nil)).(VerdictHook)
	return func() Adapter {
		d := &Defined[S]{about: info, configure: resolve, reader: reader}
		if hook {
			return hooked[S]{d}
		}
		return d
	}
}

// Defined is the Adapter Define builds (wrapped in one that adds Verdict
// when its settings are a VerdictHook). An adapter package may name it
// (type Adapter = sdk.Defined[settings]) so that its own tests can Load
// the settings Configure stored.
type Defined[S any] struct {
	// Settings holds what the last successful Configure resolved.
	Settings[S]
	about     Info
	configure func(ctx context.Context, req ConfigureRequest) (*S, error)
	reader    func(*S) Reader
}

// Info answers the Info that Define was given, with the tier of configured
// settings that are a TierReporter when theirs is the weaker.
func (d *Defined[S]) Info() Info {
	info := d.about
	s, err := d.Load()
	if err != nil {
		return info
	}
	if tr, ok := d.reader(s).(TierReporter); ok {
		if t := tr.Tier(); t.Valid() && t > info.Tier {
			info.Tier = t
		}
	}
	return info
}

// Configure decodes the section, resolves the settings and stores them,
// closing the ones a previous Configure stored when they are an io.Closer.
func (d *Defined[S]) Configure(ctx context.Context, req ConfigureRequest) error {
	s, err := d.configure(ctx, req)
	if err != nil {
		return err
	}
	if old := d.Swap(s); old != nil {
		// The old settings failing to close does not refuse the new ones.
		_ = d.close(old)
	}
	return nil
}

// TestConnection answers the settings' TestConnection.
func (d *Defined[S]) TestConnection(ctx context.Context, req TestRequest) (TestResult, error) {
	s, err := d.Load()
	if err != nil {
		return TestResult{}, err
	}
	return d.reader(s).TestConnection(ctx, req)
}

// CaptureBefore answers the settings' Read.
func (d *Defined[S]) CaptureBefore(ctx context.Context, req CaptureRequest) (Capture, error) {
	s, err := d.Load()
	if err != nil {
		return Capture{}, err
	}
	return d.reader(s).Read(ctx, req)
}

// CaptureAfter answers the settings' ReadAfter when they are an
// AfterReader, else their Read.
func (d *Defined[S]) CaptureAfter(ctx context.Context, req CaptureRequest) (Capture, error) {
	s, err := d.Load()
	if err != nil {
		return Capture{}, err
	}
	if a, ok := d.reader(s).(AfterReader); ok {
		return a.ReadAfter(ctx, req)
	}
	return d.reader(s).Read(ctx, req)
}

// CheckParams answers the settings' CheckParams when they are a
// ParamChecker; settings that bind no run parameters accept any.
func (d *Defined[S]) CheckParams(ctx context.Context, params map[string]string) error {
	s, err := d.Load()
	if err != nil {
		return err
	}
	if pc, ok := d.reader(s).(ParamChecker); ok {
		return pc.CheckParams(ctx, params)
	}
	return nil
}

// Close drops the settings and closes them when they are an io.Closer.
func (d *Defined[S]) Close() error {
	if s := d.Swap(nil); s != nil {
		return d.close(s)
	}
	return nil
}

func (d *Defined[S]) close(s *S) error {
	if c, ok := d.reader(s).(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// hooked is a Defined whose settings are a VerdictHook.
type hooked[S any] struct{ *Defined[S] }

// Verdict answers the settings' Verdict.
func (h hooked[S]) Verdict(ctx context.Context, req VerdictRequest) (Demotion, error) {
	s, err := h.Load()
	if err != nil {
		return Demotion{}, err
	}
	if v, ok := h.reader(s).(VerdictHook); ok {
		return v.Verdict(ctx, req)
	}
	return Demotion{}, nil // Define wraps only settings that are a VerdictHook
}

package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

type defCfg struct {
	Name string `json:"name"`
}

// defSettings read nothing; they count what the adapter asked of them.
type defSettings struct {
	name   string
	closed *int
}

func (s *defSettings) TestConnection(context.Context, TestRequest) (TestResult, error) {
	return TestResult{Reachable: true, Message: s.name}, nil
}

func (s *defSettings) Read(context.Context, CaptureRequest) (Capture, error) {
	return Capture{Reachable: true, Reason: "before " + s.name}, nil
}

// hookSettings add every optional interface.
type hookSettings struct{ defSettings }

func (s *hookSettings) ReadAfter(context.Context, CaptureRequest) (Capture, error) {
	return Capture{Reachable: true, Reason: "after " + s.name}, nil
}

func (s *hookSettings) CheckParams(_ context.Context, params map[string]string) error {
	if params["p"] == "" {
		return &refusal.Error{Path: "p", Message: "missing"}
	}
	return nil
}

func (s *hookSettings) Verdict(context.Context, VerdictRequest) (Demotion, error) {
	return Demotion{Verdict: VerdictIndeterminate, ReasonCode: s.name}, nil
}

func (s *hookSettings) Close() error {
	*s.closed++
	return nil
}

func TestDefinePlain(t *testing.T) {
	info := Info{Kind: "plain", Tier: TierIndependentSystem}
	a := Define(info, func(_ context.Context, cfg defCfg, _ ConfigureRequest) (*defSettings, error) {
		if cfg.Name == "" {
			return nil, &refusal.Error{Path: "name", Message: "missing"}
		}
		return &defSettings{name: cfg.Name}, nil
	})()
	ctx := t.Context()
	if a.Info() != info {
		t.Errorf("Info = %+v", a.Info())
	}
	if _, err := a.CaptureBefore(ctx, CaptureRequest{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("CaptureBefore before Configure = %v; want ErrNotConfigured", err)
	}
	if _, ok := a.(VerdictHook); ok {
		t.Error("an adapter whose settings have no Verdict is a VerdictHook")
	}
	var ce *refusal.Error
	if err := a.Configure(ctx, ConfigureRequest{Config: []byte(`{"kind":"other","name":"x"}`)}); !errors.As(err, &ce) || ce.Path != "kind" {
		t.Errorf("Configure with another kind = %v; want a refusal at kind (the adapter's own kind is checked)", err)
	}
	if err := a.Configure(ctx, ConfigureRequest{Config: []byte(`{}`)}); !errors.As(err, &ce) || ce.Path != "name" {
		t.Errorf("Configure without name = %v; want configure's refusal", err)
	}
	if err := a.Configure(ctx, ConfigureRequest{Config: []byte(`{"name":"n"}`)}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.TestConnection(ctx, TestRequest{}); err != nil || !res.Reachable || res.Message != "n" {
		t.Errorf("TestConnection = %+v, %v", res, err)
	}
	for _, capture := range []func(context.Context, CaptureRequest) (Capture, error){a.CaptureBefore, a.CaptureAfter} {
		if c, err := capture(ctx, CaptureRequest{}); err != nil || c.Reason != "before n" {
			t.Errorf("capture = %+v, %v; want Read's", c, err)
		}
	}
	if err := a.(ParamChecker).CheckParams(ctx, nil); err != nil {
		t.Errorf("CheckParams of settings that bind nothing = %v", err)
	}
}

func TestDefineOptional(t *testing.T) {
	closed := 0
	a := Define(Info{Kind: "hooked"}, func(_ context.Context, cfg defCfg, _ ConfigureRequest) (*hookSettings, error) {
		return &hookSettings{defSettings{name: cfg.Name, closed: &closed}}, nil
	})()
	ctx := t.Context()
	hook, ok := a.(VerdictHook)
	if !ok {
		t.Fatal("settings with a Verdict did not make the adapter a VerdictHook")
	}
	if _, err := hook.Verdict(ctx, VerdictRequest{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("Verdict before Configure = %v; want ErrNotConfigured", err)
	}
	if err := a.Configure(ctx, ConfigureRequest{Config: []byte(`{"name":"one"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := a.Configure(ctx, ConfigureRequest{Config: []byte(`{"name":"two"}`)}); err != nil || closed != 1 {
		t.Errorf("Configure again = %v with %d closed; want the first settings closed", err, closed)
	}
	if c, err := a.CaptureBefore(ctx, CaptureRequest{}); err != nil || c.Reason != "before two" {
		t.Errorf("CaptureBefore = %+v, %v", c, err)
	}
	if c, err := a.CaptureAfter(ctx, CaptureRequest{}); err != nil || c.Reason != "after two" {
		t.Errorf("CaptureAfter = %+v, %v; want ReadAfter's", c, err)
	}
	if d, err := hook.Verdict(ctx, VerdictRequest{}); err != nil || d.ReasonCode != "two" {
		t.Errorf("Verdict = %+v, %v", d, err)
	}
	var ce *refusal.Error
	if err := a.(ParamChecker).CheckParams(ctx, map[string]string{}); !errors.As(err, &ce) || ce.Path != "p" {
		t.Errorf("CheckParams = %v; want the settings' refusal", err)
	}
	closer, ok := a.(interface{ Close() error })
	if !ok {
		t.Fatal("the adapter is not an io.Closer")
	}
	if err := closer.Close(); err != nil || closed != 2 {
		t.Errorf("Close = %v with %d closed; want the settings closed", err, closed)
	}
	if _, err := a.TestConnection(ctx, TestRequest{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("TestConnection after Close = %v; want ErrNotConfigured", err)
	}
}

// tierSettings report the tier their configuration gives.
type tierSettings struct {
	defSettings
	tier Tier
}

func (s *tierSettings) Tier() Tier { return s.tier }

// TestDefineTierReporter: configured settings that are a TierReporter
// weaken the Info's tier, never strengthen it.
func TestDefineTierReporter(t *testing.T) {
	a := Define(Info{Kind: "tiered", Tier: TierReacquiredState}, func(_ context.Context, cfg struct {
		Tier int `json:"tier"`
	}, _ ConfigureRequest) (*tierSettings, error) {
		return &tierSettings{tier: Tier(cfg.Tier)}, nil
	})()
	ctx := t.Context()
	if got := a.Info().Tier; got != TierReacquiredState {
		t.Errorf("unconfigured tier %d; want the Info's, 3", got)
	}
	for _, tt := range []struct{ configured, want Tier }{
		{TierScreenConsistency, TierScreenConsistency}, // weaker: reported
		{TierIndependentSystem, TierReacquiredState},   // stronger: never
		{Tier(9), TierReacquiredState},                 // not a tier: ignored
	} {
		if err := a.Configure(ctx, ConfigureRequest{Config: fmt.Appendf(nil, `{"tier": %d}`, tt.configured)}); err != nil {
			t.Fatal(err)
		}
		if got := a.Info().Tier; got != tt.want {
			t.Errorf("settings of tier %d: Info tier %d; want %d", tt.configured, got, tt.want)
		}
	}
}

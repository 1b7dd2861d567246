package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

type readSettings struct{ name string }

func (s *readSettings) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}

func (s *readSettings) Read(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": s.name, "capture": req.CaptureID})}, nil
}

// TestDefinedReadAnswersBothCaptures: Define's adapter answers CaptureBefore
// and CaptureAfter with the settings' Read, and neither before Configure.
func TestDefinedReadAnswersBothCaptures(t *testing.T) {
	t.Parallel()
	a := sdk.Define(sdk.Info{Kind: "demo"}, func(_ context.Context, cfg struct {
		Name string `json:"name"`
	}, _ sdk.ConfigureRequest) (*readSettings, error) {
		return &readSettings{name: cfg.Name}, nil
	})()
	if _, err := a.CaptureBefore(t.Context(), sdk.CaptureRequest{}); !errors.Is(err, sdk.ErrNotConfigured) {
		t.Fatalf("before Configure: %v; want ErrNotConfigured", err)
	}
	if err := a.Configure(t.Context(), sdk.ConfigureRequest{Config: []byte(`{"name":"r1"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, capture := range []func(context.Context, sdk.CaptureRequest) (sdk.Capture, error){a.CaptureBefore, a.CaptureAfter} {
		c, err := capture(t.Context(), sdk.CaptureRequest{CaptureID: "c1"})
		if err != nil || !c.Reachable {
			t.Fatalf("capture: %+v, %v", c, err)
		}
		n := 0
		for rec, err := range c.Records {
			if err != nil || rec["id"] != "r1" || rec["capture"] != "c1" {
				t.Errorf("record %v, %v", rec, err)
			}
			n++
		}
		if n != 1 {
			t.Errorf("%d records, want 1", n)
		}
	}
}

func TestReadLogForgetsTheOldest(t *testing.T) {
	t.Parallel()
	l := sdk.ReadLog[int]{Size: 3}
	for i := range 5 {
		l.Put(fmt.Sprint("c", i), i)
	}
	l.Put("c4", 40) // a second put of one read does not count twice
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: true, 4: true} {
		v, ok := l.Get(fmt.Sprint("c", i))
		if ok != want {
			t.Errorf("c%d remembered: %v, want %v", i, ok, want)
		}
		if ok && i == 4 && v != 40 {
			t.Errorf("c4 = %d, want the later 40", v)
		}
	}
	var zero sdk.ReadLog[string]
	zero.Put("x", "y")
	if v, ok := zero.Get("x"); !ok || v != "y" {
		t.Errorf("the zero ReadLog: %q, %v", v, ok)
	}
}

// boundSettings bind their run parameter "id" into a path, through an
// embedded Binding.
type boundSettings struct {
	sdk.Binding[string]
	probed []string
}

func (s *boundSettings) path(params map[string]string) (string, error) {
	id, ok := params["id"]
	if !ok {
		return "", &refusal.Error{Path: "path", Message: "run parameter id is missing"}
	}
	return "/records/" + id, nil
}

func (s *boundSettings) probe(_ context.Context, path string) (sdk.TestResult, error) {
	s.probed = append(s.probed, path)
	return sdk.TestResult{Reachable: true, Message: "read " + path}, nil
}

func TestBindingChecksAndTests(t *testing.T) {
	t.Parallel()
	s := &boundSettings{}
	s.Binding = s.path
	var pc sdk.ParamChecker = s // the embedded Binding answers CheckParams
	if err := pc.CheckParams(t.Context(), map[string]string{"id": "7"}); err != nil {
		t.Errorf("CheckParams(id=7) = %v; want nil", err)
	}
	err := pc.CheckParams(t.Context(), nil)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "path" {
		t.Errorf("CheckParams(no id) = %v; want the bind's refusal.Error at path", err)
	}
	res, err := s.Test(t.Context(), sdk.TestRequest{Params: map[string]string{"id": "7"}}, s.probe)
	if err != nil || !res.Reachable || res.Message != "read /records/7" {
		t.Errorf("Test(id=7) = %+v, %v; want the probe's answer on /records/7", res, err)
	}
	res, err = s.Test(t.Context(), sdk.TestRequest{}, s.probe)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "path" || res.Reachable {
		t.Errorf("Test(no id) = %+v, %v; want the bind's refusal.Error", res, err)
	}
	if len(s.probed) != 1 {
		t.Errorf("probed %q; want one probe, never with a refused binding", s.probed)
	}
}

func TestBindingNeverSet(t *testing.T) {
	t.Parallel()
	s := &boundSettings{}
	if err := s.CheckParams(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "never sets it") {
		t.Errorf("CheckParams on an unset Binding = %v; want an error saying so", err)
	}
	if res, err := s.Test(t.Context(), sdk.TestRequest{}, s.probe); err == nil || res.Reachable || len(s.probed) != 0 {
		t.Errorf("Test on an unset Binding = %+v, %v (probed %q); want an error and no probe", res, err, s.probed)
	}
}

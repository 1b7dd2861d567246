package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/sdk"
)

type readSettings struct{ name string }

func (s *readSettings) capture(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records(sdk.Record{"id": s.name, "capture": req.CaptureID})}, nil
}

func TestBaseReadAnswersBothCaptures(t *testing.T) {
	t.Parallel()
	b := &sdk.Base[readSettings]{About: sdk.Info{Kind: "demo"}, Read: (*readSettings).capture}
	if _, err := b.CaptureBefore(t.Context(), sdk.CaptureRequest{}); !errors.Is(err, sdk.ErrNotConfigured) {
		t.Fatalf("before Configure: %v; want ErrNotConfigured", err)
	}
	b.Store(&readSettings{name: "r1"})
	for _, capture := range []func(context.Context, sdk.CaptureRequest) (sdk.Capture, error){b.CaptureBefore, b.CaptureAfter} {
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
	none := &sdk.Base[readSettings]{}
	none.Store(&readSettings{})
	if _, err := none.CaptureAfter(t.Context(), sdk.CaptureRequest{}); err == nil {
		t.Error("a Base without Read answered a capture")
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

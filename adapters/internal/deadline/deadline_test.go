package deadline

import (
	"context"
	"testing"
	"time"
)

func TestInside(t *testing.T) {
	if _, ok := Inside(t.Context()); ok {
		t.Error("a context without a deadline has none inside it")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	dl, _ := ctx.Deadline()
	if d, ok := Inside(ctx); !ok || !d.Equal(dl.Add(-Margin)) {
		t.Errorf("Inside = %v, %v; want Margin before %v", d, ok, dl)
	}
	// Little time left: a tenth of it, never all of it.
	short, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel2()
	sdl, _ := short.Deadline()
	if d, _ := Inside(short); !d.Before(sdl) || d.Before(sdl.Add(-time.Second)) {
		t.Errorf("Inside ten seconds = %v; want at most a second (a tenth) before %v", d, sdl)
	}
}

func TestWithin(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	dl, _ := ctx.Deadline()
	if d := Within(ctx, 2*time.Hour); !d.Equal(dl.Add(-Margin)) {
		t.Errorf("a budget past the caller's deadline: %v; want Margin before %v", d, dl)
	}
	before := time.Now()
	d := Within(ctx, time.Minute)
	if d.Before(before.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
		t.Errorf("a budget inside the caller's deadline: %v; want a minute from now", d)
	}
}

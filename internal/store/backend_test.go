package store_test

import (
	"context"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

// writer is a backend's own baseline writer; owner names the store that
// made it.
type writer struct{ owner string }

func (*writer) Add(context.Context, []byte) error { return nil }
func (*writer) Close(context.Context) error       { return nil }

// foreign is another backend's writer type.
type foreign struct{}

func (foreign) Add(context.Context, []byte) error { return nil }
func (foreign) Close(context.Context) error       { return nil }

func TestOwnWriters(t *testing.T) {
	t.Parallel()
	mine := func(w *writer) bool { return w.owner == "a" }
	a1, a2 := &writer{"a"}, &writer{"a"}
	ws, err := store.OwnWriters("s1", []store.BaselineWriter{a1, a2}, mine)
	if err != nil || len(ws) != 2 || ws[0] != a1 || ws[1] != a2 {
		t.Fatalf("own writers: %v, %v; want both, in order", ws, err)
	}
	if ws, err := store.OwnWriters("s1", nil, mine); err != nil || len(ws) != 0 {
		t.Fatalf("no writers: %v, %v; want none and no error", ws, err)
	}
	for name, bs := range map[string][]store.BaselineWriter{
		"another store's": {a1, &writer{"b"}},
		"another type":    {foreign{}, a1},
	} {
		ws, err := store.OwnWriters("s1", bs, mine)
		if err == nil || ws != nil {
			t.Errorf("%s writer: %v, %v; want a refusal", name, ws, err)
			continue
		}
		if want := "session s1: a baseline writer of another store"; err.Error() != want {
			t.Errorf("%s writer: %q, want %q", name, err, want)
		}
	}
}

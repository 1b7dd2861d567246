package filewalk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
)

func TestCompileRefusals(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"/etc/*":   "relative to root",
		"a//b":     "empty, . or ..",
		"../*":     "empty, . or ..",
		"**/*.csv": "** is not supported",
		"[a-":      "not a valid pattern",
	} {
		if _, err := Compile(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %v; want an error saying %q", p, err, want)
		}
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"a.csv":            {},
		"b.txt":            {},
		"sub/c.csv":        {},
		"sub/deeper/d.csv": {},
		"other/e.csv":      {},
	}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"", []string{"a.csv", "b.txt"}},
		{"*.csv", []string{"a.csv"}},
		{"*/*.csv", []string{"other/e.csv", "sub/c.csv"}},
		{"sub/*/*", []string{"sub/deeper/d.csv"}},
		{"s?b/[c-d].csv", []string{"sub/c.csv"}},
		{"none-*", nil},
	}
	for _, tt := range tests {
		p, err := Compile(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := Select(context.Background(), fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Rel)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("pattern %q (-want +got):\n%s", tt.pattern, diff)
		}
	}
}

func TestSelectStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ := Compile("")
	if _, err := Select(ctx, fstest.MapFS{"a": {}}, p); err == nil {
		t.Error("a cancelled walk succeeded")
	}
}

func TestFresh(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := time.Minute
	for _, tt := range []struct {
		mtime time.Time
		want  bool
	}{
		{now, true},
		{now.Add(-w), true},                    // exactly the window: fresh
		{now.Add(-w - time.Nanosecond), false}, // just past it
		{now.Add(w), true},
		{now.Add(w + time.Second), false}, // from the future beyond the window
	} {
		if got := Fresh(tt.mtime, now, w); got != tt.want {
			t.Errorf("Fresh(%v) = %v; want %v", tt.mtime, got, tt.want)
		}
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	if d, err := ParseWindow(json.Number("1.5")); err != nil || d != 1500*time.Millisecond {
		t.Errorf("ParseWindow(1.5) = %v, %v", d, err)
	}
	for _, bad := range []string{"0", "-1", "NaN", "x", "99999999"} {
		if _, err := ParseWindow(json.Number(bad)); err == nil {
			t.Errorf("ParseWindow(%s) accepted", bad)
		}
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	files := []string{"a", "skip", "b", "bad", "c"}
	rel := func(f string) string { return "sub/" + f }
	read := func(f string) (sdk.Record, error) {
		switch f {
		case "skip":
			return nil, nil
		case "bad":
			return nil, errors.New("disk failed")
		}
		return sdk.Record{"id": f}, nil
	}
	collect := func(ctx context.Context, stopAfter int) ([]string, []string, bool) {
		var ids, errs []string
		done := Stream(ctx, func(rec sdk.Record, err error) bool {
			if err != nil {
				errs = append(errs, err.Error())
				return false
			}
			id, _ := rec["id"].(string)
			ids = append(ids, id)
			return len(ids) < stopAfter
		}, "/data", "document", files, rel, read)
		return ids, errs, done
	}
	ids, errs, done := collect(t.Context(), 10)
	if diff := cmp.Diff([]string{"a", "b"}, ids); diff != "" || done {
		t.Errorf("records (-want +got):\n%s; completed %v, want false", diff, done)
	}
	if diff := cmp.Diff([]string{"reading document sub/bad: disk failed"}, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	ids, errs, done = collect(t.Context(), 1)
	if len(ids) != 1 || len(errs) != 0 || done {
		t.Errorf("a consumer stopping after one record: %q, %q, completed %v; want [a], no error, false", ids, errs, done)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ids, errs, done = collect(ctx, 10)
	if diff := cmp.Diff([]string{"reading the documents under /data: context canceled"}, errs); diff != "" || len(ids) != 0 || done {
		t.Errorf("a cancelled capture: records %q, completed %v, errors (-want +got):\n%s", ids, done, diff)
	}
	files = []string{"a", "skip", "c"}
	ids, errs, done = collect(t.Context(), 10)
	if diff := cmp.Diff([]string{"a", "c"}, ids); diff != "" || len(errs) != 0 || !done {
		t.Errorf("records (-want +got):\n%s; errors %q, completed %v, want none and true", diff, errs, done)
	}
}

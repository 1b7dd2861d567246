package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

// seedStore writes a store with a few sessions, one with a baseline of
// several MB, and returns its dir.
func seedStore(t *testing.T) string { return seedStoreN(t, 20_000) }

func seedStoreN(t *testing.T, records int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		w := s.NewBaseline(id, 0)
		for r := range records {
			if err := w.Add(t.Context(), fmt.Appendf(nil, `{"id":%d,"note":"%0200d"}`, r, r)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateSession(t.Context(), id, []byte(`{"m":1}`), w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.FinishSession(t.Context(), "s2", []byte("result")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyStore copies a data dir (store and marker) into a new temp dir.
func copyStore(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{storeFile, markerFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// layout returns the page size, the current meta and the pages in use by
// the tree of a sound store file, read with the checker.
func layout(t *testing.T, path string) (int, meta, []uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep := &Report{Path: path}
	w, m := openFile(f, rep, false)
	if w == nil {
		t.Fatal(rep.Err())
	}
	w.checkAll(m)
	if rep.Err() != nil {
		t.Fatal(rep.Err())
	}
	var leaves []uint64
	buf := make([]byte, pageHeaderSize)
	for i := uint64(2); i < w.high; i++ {
		if !w.used[i] || i == m.freelist {
			continue
		}
		if _, err := f.ReadAt(buf, int64(i)*int64(w.psize)); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(buf) == i && binary.LittleEndian.Uint16(buf[8:]) == flagLeaf {
			leaves = append(leaves, i)
		}
	}
	return w.psize, m, leaves
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func garbage(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestOpenCorruptStore: every damaged copy is refused with an error naming
// the file and the page, never a panic; Check reports the same first
// problem.
func TestOpenCorruptStore(t *testing.T) {
	t.Parallel()
	clean := seedStore(t)
	psize, m, leaves := layout(t, filepath.Join(clean, storeFile))
	if len(leaves) < 3 {
		t.Fatalf("only %d leaf pages", len(leaves))
	}
	cases := []struct {
		name   string
		damage func(path string)
		page   string
	}{
		{"garbage over the root pages", func(p string) {
			writeAt(t, p, int64(m.root)*int64(psize), garbage(3*psize))
		}, fmt.Sprintf("page %d", m.root)},
		{"garbage over the freelist", func(p string) {
			writeAt(t, p, int64(m.freelist)*int64(psize)+pageHeaderSize, garbage(psize-pageHeaderSize))
		}, "page "},
		{"garbage over a baseline leaf", func(p string) {
			writeAt(t, p, int64(leaves[len(leaves)/2])*int64(psize)+8, garbage(psize-8))
		}, fmt.Sprintf("page %d", leaves[len(leaves)/2])},
		{"truncated file", func(p string) {
			fi, _ := os.Stat(p)
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"bad page flags", func(p string) {
			writeAt(t, p, int64(leaves[1])*int64(psize)+8, []byte{0x55, 0})
		}, fmt.Sprintf("page %d: bad page flags 0x55", leaves[1])},
		{"zeroed meta pages", func(p string) {
			writeAt(t, p, 0, make([]byte, 2*psize))
		}, "page 0: both meta pages"},
		{"0-byte file with the marker", func(p string) {
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}, "page 0"},
		{"missing file with the marker", func(p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, "the file is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyStore(t, clean)
			path := filepath.Join(dir, storeFile)
			c.damage(path)
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatal("a damaged store opened")
			}
			if _, ok := errors.AsType[*CorruptError](err); !ok {
				t.Fatalf("error %v (%T), want a *CorruptError", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, c.page) {
				t.Errorf("error %q does not name %s and %q", msg, path, c.page)
			}
			if !strings.Contains(msg, "backup") {
				t.Errorf("error %q does not say what to do", msg)
			}
			rep, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Err() == nil || rep.Err().Error() != msg {
				t.Errorf("Check found %v, want the same as Open: %s", rep.Err(), msg)
			}
		})
	}
}

func TestInitStoreAcceptsEmpty(t *testing.T) {
	t.Parallel()
	dir := copyStore(t, seedStore(t))
	if err := os.Truncate(filepath.Join(dir, storeFile), 0); err != nil {
		t.Fatal(err)
	}
	s, err := OpenWith(dir, Options{InitStore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Session(t.Context(), "s0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session in a re-initialised store: %v", err)
	}
}

func TestCheckClean(t *testing.T) {
	t.Parallel()
	dir := seedStore(t)
	rep, err := Check(dir)
	if err != nil || rep.Err() != nil {
		t.Fatalf("clean store: %v %v", err, rep.Err())
	}
	// A running daemon holds the store: Check refuses rather than reading a
	// file being written.
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := checkTimeout(dir, 0); !errors.Is(err, ErrLocked) {
		t.Errorf("check of a store in use: %v, want ErrLocked", err)
	}
}

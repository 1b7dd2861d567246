package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// verifierdBin builds the daemon once into a temp dir.
func verifierdBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "verifierd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "verifierd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// runBin runs the binary and returns its exit code, stdout and stderr.
func runBin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	// The binary is built (once) before the clock starts: on a loaded
	// machine the build alone can take minutes. The bound is only a
	// backstop for a hang, so it is generous.
	bin := verifierdBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

// seed writes a store with n sessions, each with a baseline, and, when
// orphan, the chunks of a Begin killed before it committed its session.
func seed(t *testing.T, n int, orphan bool) string {
	t.Helper()
	dir := t.TempDir()
	s, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	add := func(w store.BaselineWriter, n int) {
		for i := range n {
			if err := w.Add(t.Context(), fmt.Appendf(nil, `{"id":%d,"note":"%0200d"}`, i, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		w := s.NewBaseline(id, 0)
		add(w, 1000)
		if err := s.CreateSession(t.Context(), id, []byte(`{}`), w); err != nil {
			t.Fatal(err)
		}
	}
	if orphan {
		add(s.NewBaseline("killed", 0), 30_000) // flushes a 4 MB chunk
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func noTrace(t *testing.T, stderr string) {
	t.Helper()
	for _, bad := range []string{"panic:", "goroutine ", ".go:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr has a stack trace (%q):\n%s", bad, stderr)
		}
	}
}

// TestCorruptStoreStopsDaemon: `store check` exits 1 naming the page, and
// the daemon started on the same dir exits 1 with the same message and no
// stack trace.
func TestCorruptStoreStopsDaemon(t *testing.T) {
	cases := map[string]func(path string){
		"zeroed meta pages": func(path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 8192), 0); err != nil {
				panic(err)
			}
		},
		"bad page flags": func(path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for p := int64(2); p < 16; p++ { // every tree page near the start
				var hdr [16]byte
				if _, err := f.ReadAt(hdr[:], p*4096); err != nil {
					panic(err)
				}
				if hdr[8] == 0x01 || hdr[8] == 0x02 {
					if _, err := f.WriteAt([]byte{0x55}, p*4096+8); err != nil {
						panic(err)
					}
				}
			}
		},
		"truncated": func(path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		},
		"0-byte with the marker": func(path string) { must(os.Truncate(path, 0)) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := seed(t, 3, false)
			damage(filepath.Join(dir, "verifierd.db"))
			code, _, checkErr := runBin(t, "store", "check", "--data-dir", dir)
			if code != 1 || !strings.Contains(checkErr, "page ") || !strings.Contains(checkErr, "is corrupt") {
				t.Fatalf("store check: exit %d, stderr %s; want 1 naming the page", code, checkErr)
			}
			first, _, _ := strings.Cut(checkErr, "\n")
			code, _, daemonErr := runBin(t, "--data-dir", dir, "--listen", "127.0.0.1:0", "--builtin-dir", t.TempDir())
			if code != 1 {
				t.Errorf("daemon on a corrupt store: exit %d, want 1\n%s", code, daemonErr)
			}
			if !strings.Contains(daemonErr, first) {
				t.Errorf("daemon said\n%s\nwant the check's message\n%s", daemonErr, first)
			}
			noTrace(t, daemonErr)
			noTrace(t, checkErr)
		})
	}
}

func TestStoreCheckAndCompactClean(t *testing.T) {
	dir := seed(t, 5, false)
	code, out, errs := runBin(t, "store", "check", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "is sound") {
		t.Fatalf("check of a clean store: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runBin(t, "store", "compact", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "5 sessions kept") {
		t.Fatalf("compact: exit %d\n%s%s", code, out, errs)
	}
	s, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := s.Session(t.Context(), fmt.Sprintf("s%d", i)); err != nil {
			t.Errorf("session s%d after compact: %v", i, err)
		}
	}
	// A daemon holds the store: compact refuses.
	code, _, errs = runBin(t, "store", "compact", "--data-dir", dir)
	s.Close()
	if code != 1 || !strings.Contains(errs, "locked") {
		t.Errorf("compact while the store is in use: exit %d %s", code, errs)
	}
	if code, _, _ := runBin(t, "store", "bogus"); code != 2 {
		t.Errorf("unknown store command: exit %d, want 2", code)
	}
}

func TestStoreSalvageCommand(t *testing.T) {
	dir := seed(t, 2, false)
	out := filepath.Join(t.TempDir(), "new")
	code, stdout, errs := runBin(t, "store", "salvage", "--data-dir", dir, "--out", out)
	if code != 0 || !strings.Contains(stdout, "2 sessions") {
		t.Fatalf("salvage: exit %d\n%s%s", code, stdout, errs)
	}
	if code, _, errs := runBin(t, "store", "check", "--data-dir", out); code != 0 {
		t.Errorf("check of the salvaged store: exit %d %s", code, errs)
	}
}

// startDaemon runs the daemon until it listens, then stops it with SIGTERM
// and returns its stderr.
func startDaemon(t *testing.T, args ...string) string {
	t.Helper()
	// --http-listen "": the default port would collide between tests.
	cmd := exec.Command(verifierdBin(t), append([]string{"--listen", "127.0.0.1:0", "--http-listen", "", "--builtin-dir", t.TempDir()}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(pipe)
	listening := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "verifierd listening") {
			listening = true
			break
		}
	}
	if !listening {
		cmd.Wait()
		t.Fatalf("the daemon did not start:\n%s", log.String())
	}
	// The signal may arrive before the daemon handles signals; either way
	// it stops.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("daemon: %v\n%s", err, log.String())
	}
	return log.String()
}

// TestDaemonRemovesOrphansAtStart: the chunks of a Begin killed before its
// commit are gone after a start; the committed sessions stay. An empty store
// with the marker needs --init-store.
func TestDaemonRemovesOrphansAtStart(t *testing.T) {
	dir := seed(t, 2, true)
	log := startDaemon(t, "--data-dir", dir, "--retain-unfinished", "24h")
	if !strings.Contains(log, "orphan_baselines=1") {
		t.Errorf("no orphan removal logged:\n%s", log)
	}
	s, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon sealed the store's values: read them with its evidence key.
	key, err := session.LoadEvidenceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bind(t.Context(), store.IntegrityKey(key), store.Keys{EvidenceKeyID: store.EvidenceKeyID(key), SigningKeyID: "test"}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadBaseline(t.Context(), "killed", 0, func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("orphan baseline after start: %v", err)
	}
	for _, id := range []string{"s0", "s1"} {
		if err := s.ReadBaseline(t.Context(), id, 0, func([]byte) error { return nil }); err != nil {
			t.Errorf("session %s's baseline: %v", id, err)
		}
	}
	s.Close()

	if err := os.Truncate(filepath.Join(dir, "verifierd.db"), 0); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runBin(t, "--data-dir", dir, "--listen", "127.0.0.1:0", "--builtin-dir", t.TempDir()); code != 1 || !strings.Contains(errs, "--init-store") {
		t.Errorf("empty store with the marker: exit %d %s", code, errs)
	}
	startDaemon(t, "--data-dir", dir, "--init-store")
}

// TestOpenSigningKeyStopsDaemon: a --signing-key readable by others stops
// the daemon at start with a message saying what to do.
func TestOpenSigningKeyStopsDaemon(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "open.key")
	if err := os.WriteFile(key, []byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBin(t, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--signing-key", key)
	if code != 1 || !strings.Contains(stderr, "chmod 600") {
		t.Fatalf("exit %d, stderr %q; want exit 1 saying chmod 600", code, stderr)
	}
	noTrace(t, stderr)
}

// must panics on a failed step of a corruption recipe (those run outside a
// test's goroutine helpers and have no t).
func must(err error) {
	if err != nil {
		panic(err)
	}
}

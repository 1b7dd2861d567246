package documenthash

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-document-hash, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/document-hash", "document-hash", &pluginBinary)
}

func section(t testing.TB, kv ...string) json.RawMessage {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inProcess(t testing.TB) *adaptertest.Instance {
	t.Helper()
	return adaptertest.InProcess(t, New)
}

func configured(t testing.TB, kv ...string) *adaptertest.Instance {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, kv...)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

func write(t testing.TB, root, rel, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func sum(content string) string {
	h := sha256.Sum256([]byte(content))
	return hex.EncodeToString(h[:])
}

func captureAll(t testing.TB, c *adaptertest.Instance) (*adaptertest.Stream, []sdk.Record) {
	t.Helper()
	capt, err := c.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "t", Timeout: time.Minute})
	if err != nil {
		t.Fatalf("CaptureAfter returned an error: %v", err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("reading the records: %v", err)
	}
	return capt, recs
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, "file.txt", "x", time.Time{})
	tests := []struct {
		name     string
		kv       []string
		wantPath string
		wantMsg  string
	}{
		{"no root", nil, "root", "missing"},
		{"root missing", []string{"root", filepath.Join(root, "nope")}, "root", "does not exist"},
		{"root is a file", []string{"root", filepath.Join(root, "file.txt")}, "root", "is not a folder"},
		{"bad pattern", []string{"root", root, "glob", "[a-"}, "glob", "is not a valid pattern"},
		{"double star", []string{"root", root, "glob", "**/*.pdf"}, "glob", "** is not supported"},
		{"absolute glob", []string{"root", root, "glob", "/etc/*"}, "glob", "must be relative to root"},
		{"dot dot", []string{"root", root, "glob", "../*"}, "glob", ".. segment"},
		{"unknown key", []string{"root", root, "file_pattern", "*.pdf"}, "file_pattern", "unknown key"},
		{"wrong kind", []string{"kind", "file", "root", root}, "kind", `not "file"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, tt.kv...)})
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q; want path %q and %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "document-hash" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("Info = %+v", info.Info)
	}
}

func TestCaptureRecords(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	at := time.Date(2024, 5, 1, 10, 20, 30, 123456789, time.UTC)
	files := map[string]string{
		"a.txt":              "alpha\n",
		"b.pdf":              "%PDF-1.7 not really",
		"empty.txt":          "",
		"sub/c.txt":          "gamma",
		"sub/d.pdf":          "delta",
		"sub/deeper/e.txt":   "epsilon",
		"other/f.txt":        "phi",
		"name with space.md": "spaced",
	}
	for rel, content := range files {
		write(t, root, rel, content, at)
	}
	if err := os.Mkdir(filepath.Join(root, "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	record := func(rel string) sdk.Record {
		content := files[rel]
		return sdk.Record{
			"id": rel, "path": rel, "name": filepath.Base(rel),
			"size":   json.Number(fmt.Sprint(len(content))),
			"mtime":  "2024-05-01T10:20:30.123456789Z",
			"sha256": sum(content),
		}
	}
	tests := []struct {
		glob string
		want []string
	}{
		{"", []string{"a.txt", "b.pdf", "empty.txt", "name with space.md"}},
		{"*.txt", []string{"a.txt", "empty.txt"}},
		{"sub/*", []string{"sub/c.txt", "sub/d.pdf"}},
		{"*/*.txt", []string{"other/f.txt", "sub/c.txt"}},
		{"*/*/*", []string{"sub/deeper/e.txt"}},
		{"s?b/[cd].*", []string{"sub/c.txt", "sub/d.pdf"}},
		{"nothing-*", nil},
	}
	for _, tt := range tests {
		t.Run("glob="+tt.glob, func(t *testing.T) {
			t.Parallel()
			kv := []string{"root", root}
			if tt.glob != "" {
				kv = append(kv, "glob", tt.glob)
			}
			capt, got := captureAll(t, configured(t, kv...))
			if !capt.Reachable {
				t.Fatalf("unreachable: %s", capt.Reason)
			}
			var want []sdk.Record
			for _, rel := range tt.want {
				want = append(want, record(rel))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSymlinksStayInsideRoot(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, outside, "secret.txt", "outside root", time.Time{})
	root := t.TempDir()
	write(t, root, "real.txt", "inside", time.Time{})
	write(t, root, "sub/deep.txt", "deep inside", time.Time{})
	links := map[string]string{
		"inside-link.txt":   "real.txt",
		"escape.txt":        filepath.Join("..", filepath.Base(outside), "secret.txt"),
		"absolute.txt":      filepath.Join(outside, "secret.txt"),
		"absolute-self.txt": filepath.Join(root, "real.txt"),
		"dangling.txt":      "nowhere.txt",
		"dir-link":          outside,
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The escape must really lead out: both folders share one parent.
	if filepath.Dir(outside) != filepath.Dir(root) {
		t.Skip("temporary folders do not share a parent")
	}
	for _, glob := range []string{"*", "*/*"} {
		_, recs := captureAll(t, configured(t, "root", root, "glob", glob))
		var got []string
		for _, r := range recs {
			got = append(got, r["path"].(string)+"="+r["sha256"].(string))
			if r["sha256"] == sum("outside root") {
				t.Errorf("read a document outside root through %s", r["path"])
			}
		}
		want := map[string][]string{
			"*":   {"inside-link.txt=" + sum("inside"), "real.txt=" + sum("inside")},
			"*/*": {"sub/deep.txt=" + sum("deep inside")},
		}[glob]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("glob %s (-want +got):\n%s", glob, diff)
		}
	}
}

func TestRootGoneIsUnreachable(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "store")
	write(t, root, "a.txt", "a", time.Time{})
	ip := configured(t, "root", root)
	if capt, recs := captureAll(t, ip); !capt.Reachable || len(recs) != 1 {
		t.Fatalf("before: reachable=%v, %d records", capt.Reachable, len(recs))
	}
	if res, err := ip.TestConnection(t.Context()); err != nil || !res.Reachable {
		t.Fatalf("TestConnection = %+v, %v", res, err)
	}

	if err := os.Rename(root, root+".moved"); err != nil {
		t.Fatal(err)
	}
	capt, recs := captureAll(t, ip)
	if capt.Reachable || len(recs) != 0 {
		t.Fatalf("root gone: reachable=%v with %d records; want unreachable", capt.Reachable, len(recs))
	}
	if !strings.Contains(capt.Reason, root) {
		t.Errorf("reason %q does not name the root", capt.Reason)
	}
	if res, err := ip.TestConnection(t.Context()); err != nil || res.Reachable {
		t.Errorf("TestConnection with root gone = %+v, %v; want unreachable", res, err)
	}

	// A file where the folder was is no better.
	write(t, parent, "store", "not a folder", time.Time{})
	if capt, _ := captureAll(t, ip); capt.Reachable {
		t.Error("a file in place of root was read as reachable")
	}
}

// TestLargeFileIsStreamed hashes a 50 MiB document and checks the adapter
// allocated far less than the document's size while doing it. It is not
// parallel, so that no other test's allocations count.
func TestLargeFileIsStreamed(t *testing.T) {
	const size = 50 << 20
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	chunk := make([]byte, 1<<20)
	for i := 0; i < size/len(chunk); i++ {
		for j := range chunk {
			chunk[j] = byte(i*31 + j*7)
		}
		if _, err := io.MultiWriter(f, want).Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ip := configured(t, "root", root)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, recs := captureAll(t, ip)
	runtime.ReadMemStats(&after)

	if len(recs) != 1 {
		t.Fatalf("%d records; want 1", len(recs))
	}
	if got := recs[0]["sha256"]; got != hex.EncodeToString(want.Sum(nil)) {
		t.Errorf("sha256 = %v; want crypto/sha256's %x", got, want.Sum(nil))
	}
	if got := recs[0]["size"]; got != json.Number(fmt.Sprint(size)) {
		t.Errorf("size = %v; want %d", got, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("hashing a %d-byte file allocated %d bytes: it was not streamed", size, alloc)
	} else {
		t.Logf("hashing %d bytes allocated %d bytes", size, alloc)
	}
}

func TestPluginBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, "invoice-1.pdf", "invoice one", time.Time{})
	write(t, root, "notes.txt", "not matched", time.Time{})
	bin := adaptertest.Subprocess(t, pluginBinary)
	if err := bin.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, "kind", Kind, "root", root, "glob", "*.pdf")}); err != nil {
		t.Fatal(err)
	}
	capt, recs := captureAll(t, bin)
	if !capt.Reachable || len(recs) != 1 || recs[0]["sha256"] != sum("invoice one") || recs[0]["id"] != "invoice-1.pdf" {
		t.Errorf("through the binary: reachable=%v records=%v", capt.Reachable, recs)
	}
}

// docStore is the harness's handle on a real folder of documents for the
// qualification kit. The selected entity is a document's content: its
// SHA-256.
type docStore struct {
	root string
	mu   sync.Mutex
	next int
}

const (
	wantedContent = "invoice 42: 100.00 EUR\n"
	otherContent  = "invoice 43: 250.00 EUR\n"
)

func (s *docStore) name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return fmt.Sprintf("doc-%06d.txt", s.next)
}

// put writes a document atomically (a temporary name the glob does not
// match, then a rename), as a careful exporter does.
func (s *docStore) put(t *testing.T, content string, mtime time.Time) string {
	t.Helper()
	name := s.name()
	tmp := filepath.Join(s.root, name+".part")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return name
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Error(err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(s.root, name)); err != nil {
		t.Error(err)
	}
	return name
}

func TestQualification(t *testing.T) {
	s := &docStore{root: filepath.Join(t.TempDir(), "store")}
	if err := os.Mkdir(s.root, 0o755); err != nil {
		t.Fatal(err)
	}
	config := func(root string) sdk.ConfigureRequest {
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, "kind", Kind, "root", root, "glob", "*.txt")}
	}
	adaptertest.Run(t, adaptertest.Harness{
		Binary: pluginBinary,
		Config: func(t *testing.T) sdk.ConfigureRequest { return config(s.root) },
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest {
			// A folder has no credentials but its permissions; root
			// ignores them.
			if os.Geteuid() == 0 {
				t.Skip("document-hash has no credentials; its access control is folder permissions, which root bypasses")
			}
			locked := filepath.Join(t.TempDir(), "locked")
			if err := os.Mkdir(locked, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(locked, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
			return config(locked)
		},
		Selector:      map[string]string{"sha256": sum(wantedContent)},
		IdentityField: "id",
		Reset: func(t *testing.T) {
			entries, err := os.ReadDir(s.root)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(s.root, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		},
		WriteCorrect:     func(t *testing.T) string { return s.put(t, wantedContent, time.Time{}) },
		WriteWrongEntity: func(t *testing.T) string { return s.put(t, otherContent, time.Time{}) },
		WriteDuplicate:   func(t *testing.T) string { return s.put(t, wantedContent, time.Time{}) },
		WriteStale: func(t *testing.T) (string, string) {
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			s.put(t, wantedContent, old)
			return "mtime", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				s.put(t, wantedContent, time.Time{})
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, reachable bool) {
			away := s.root + ".away"
			from, to := s.root, away
			if reachable {
				from, to = away, s.root
			}
			if _, err := os.Stat(from); err != nil {
				return // already in that state
			}
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) {
			for range n {
				if err := os.WriteFile(filepath.Join(s.root, s.name()), []byte(wantedContent), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

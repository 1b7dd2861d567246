package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/sshd"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// dropFolder is the harness's handle on a real folder where files land.
// The selected entity is a file whose content the probe matches.
type dropFolder struct {
	root string
	mu   sync.Mutex
	next int
}

const (
	wantedContent = "invoice 42: 100.00 EUR\n"
	otherContent  = "invoice 43: 250.00 EUR\n"
)

func (d *dropFolder) name() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	return fmt.Sprintf("export-%06d.csv", d.next)
}

// put lands a file atomically, as a careful uploader does: a temporary
// name the pattern does not select, then a rename.
func (d *dropFolder) put(t *testing.T, content string, mtime time.Time) string {
	t.Helper()
	name := d.name()
	tmp := filepath.Join(d.root, name+".part")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return name
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Error(err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(d.root, name)); err != nil {
		t.Error(err)
	}
	return name
}

func (d *dropFolder) harness(t *testing.T) adaptertest.Harness {
	return adaptertest.Harness{
		Selector:      map[string]string{"content_match": "true", "size_ok": "true"},
		IdentityField: "id",
		Reset: func(t *testing.T) {
			entries, err := os.ReadDir(d.root)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(d.root, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		},
		WriteCorrect:     func(t *testing.T) string { return d.put(t, wantedContent, time.Time{}) },
		WriteWrongEntity: func(t *testing.T) string { return d.put(t, otherContent, time.Time{}) },
		WriteDuplicate:   func(t *testing.T) string { return d.put(t, wantedContent, time.Time{}) },
		WriteStale: func(t *testing.T) (string, string) {
			d.put(t, wantedContent, time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
			return "mtime", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				d.put(t, wantedContent, time.Time{})
			}()
			t.Cleanup(func() { <-done })
		},
		SeedMany: d.seedMany,
	}
}

// seedMany lands n matching files. Under load, 50,000 os.WriteFile calls
// (open, write, close each) took minutes, so it writes the content once to
// a fresh template outside the drop folder (same file system) and
// hard-links it under n names: one syscall a file. Each file is still a
// separate name the pattern selects, with the wanted content and a
// modification time from this call; the adapter reads files by name.
func (d *dropFolder) seedMany(t *testing.T, n int) {
	t.Helper()
	template := filepath.Join(filepath.Dir(d.root), "seed-template")
	// A new inode each call: rewriting the old one in place would touch
	// the files an earlier call linked to it.
	if err := os.Remove(template); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(template, []byte(wantedContent), 0o644); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := os.Link(template, filepath.Join(d.root, d.name())); err != nil {
			t.Fatal(err)
		}
	}
}

func newDropFolder(t *testing.T) *dropFolder {
	d := &dropFolder{root: filepath.Join(t.TempDir(), "drop")}
	if err := os.Mkdir(d.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func probeSection(root string) map[string]any {
	return map[string]any{"kind": Kind, "root": root, "file_pattern": "export-*.csv", "file_content_probe": `invoice 42\b`}
}

// TestQualificationLocal runs the kit in process against a local folder.
func TestQualificationLocal(t *testing.T) {
	d := newDropFolder(t)
	h := d.harness(t)
	h.Factory = New
	h.Config = func(t *testing.T) sdk.ConfigureRequest {
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, probeSection(d.root))}
	}
	h.BadCredentials = func(t *testing.T) sdk.ConfigureRequest {
		// A local folder's only credential is its permissions, which root
		// bypasses.
		if os.Geteuid() == 0 {
			t.Skip("a local folder has no credentials but permissions, which root bypasses; the SFTP run covers refused credentials")
		}
		locked := filepath.Join(t.TempDir(), "locked")
		if err := os.Mkdir(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, probeSection(locked))}
	}
	h.SetReachable = func(t *testing.T, reachable bool) {
		away := d.root + ".away"
		from, to := d.root, away
		if reachable {
			from, to = away, d.root
		}
		if _, err := os.Stat(from); err != nil {
			return
		}
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	adaptertest.Run(t, h)
}

// TestQualificationSFTP runs the kit through the real plugin binary against
// a real sshd serving the drop folder; the outage is the server stopped.
func TestQualificationSFTP(t *testing.T) {
	srv := sshd.Start(t)
	d := newDropFolder(t)
	h := d.harness(t)
	h.Binary = pluginBinary
	config := func(t *testing.T, key []byte) sdk.ConfigureRequest {
		cfg, _ := sftpConfig(srv, probeSection(d.root))
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, cfg), Secrets: map[string]string{slotPrivateKey: string(key)}}
	}
	wrongKey := testKey(t)
	h.Config = func(t *testing.T) sdk.ConfigureRequest { return config(t, srv.ClientKey) }
	h.BadCredentials = func(t *testing.T) sdk.ConfigureRequest { return config(t, wrongKey) }
	h.SetReachable = func(t *testing.T, reachable bool) {
		if reachable {
			if srv.Pid() == 0 {
				srv.Restart(t)
			}
			return
		}
		srv.Stop()
	}
	adaptertest.Run(t, h)
}

// The kit's selector reads booleans as "true"; make sure the record really
// carries JSON booleans, which the judge canonicalises the same way.
func TestFlagsAreBooleans(t *testing.T) {
	t.Parallel()
	d := newDropFolder(t)
	d.put(t, wantedContent, time.Time{})
	_, recs := captureAll(t, configured(t, probeSection(d.root), nil), time.Minute)
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["content_match"] != true || got[0]["size_ok"] != true {
		t.Errorf("records %s; want content_match and size_ok as JSON true", b)
	}
}

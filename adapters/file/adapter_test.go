package file

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-file, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/file", Kind, &pluginBinary)
}

// section is a deployment section as the daemon sends it.
func section(t testing.TB, m map[string]any) json.RawMessage {
	t.Helper()
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

func configured(t testing.TB, cfg map[string]any, secrets map[string]string) *adaptertest.Instance {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, cfg), Secrets: secrets}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

func writeAt(t testing.TB, root, rel, content string, mtime time.Time) {
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

// captureAll reads once through c with the given timeout.
func captureAll(t testing.TB, c *adaptertest.Instance, timeout time.Duration) (*adaptertest.Stream, []sdk.Record) {
	t.Helper()
	capt, err := c.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "t", Timeout: timeout})
	if err != nil {
		t.Fatalf("CaptureAfter returned an error; an outage must be Reachable=false: %v", err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("reading the records: %v", err)
	}
	return capt, recs
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "file" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("Info = %+v", info.Info)
	}
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	keyPEM := string(testKey(t))
	sftpWith := func(kv map[string]any) map[string]any {
		s := map[string]any{"host": "127.0.0.1", "user": "reader", "host_key_fingerprint": "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s", "private_key_env": "SFTP_KEY"}
		for k, v := range kv {
			if v == nil {
				delete(s, k)
			} else {
				s[k] = v
			}
		}
		return map[string]any{"root": "/srv/drop", "sftp": s}
	}
	keySecret := map[string]string{slotPrivateKey: keyPEM}
	tests := []struct {
		name     string
		cfg      map[string]any
		secrets  map[string]string
		wantPath string
		wantMsg  string
	}{
		{"no root", map[string]any{}, nil, "root", "missing"},
		{"unknown key", map[string]any{"root": "/x", "glob": "*"}, nil, "glob", "unknown key for kind file"},
		{"wrong kind", map[string]any{"kind": "document", "root": "/x"}, nil, "kind", `not "document"`},
		{"bad pattern", map[string]any{"root": "/x", "file_pattern": "[a-"}, nil, "file_pattern", "not a valid pattern"},
		{"absolute pattern", map[string]any{"root": "/x", "file_pattern": "/etc/*"}, nil, "file_pattern", "relative to root"},
		// The pattern is the operator's: a run parameter can never reach the glob.
		{"run parameter in the pattern", map[string]any{"root": "/x", "file_pattern": map[string]any{"param": "p"}}, nil, "file_pattern", "must be a string"},
		{"negative min size", map[string]any{"root": "/x", "file_min_size": -1}, nil, "file_min_size", "0 or more"},
		{"fractional min size", map[string]any{"root": "/x", "file_min_size": 1.5}, nil, "file_min_size", "whole number"},
		{"zero window", map[string]any{"root": "/x", "file_mtime_window_s": 0}, nil, "file_mtime_window_s", "above 0"},
		{"bad probe", map[string]any{"root": "/x", "file_content_probe": "(unclosed"}, nil, "file_content_probe", "not a valid regular expression"},
		{"unknown sftp key", sftpWith(map[string]any{"pasword_env": "X"}), keySecret, "sftp.pasword_env", "unknown key"},
		{"no trust", sftpWith(map[string]any{"host_key_fingerprint": nil}), keySecret, "sftp.known_hosts", "never accepted"},
		{"md5 fingerprint", sftpWith(map[string]any{"host_key_fingerprint": "MD5:16:27:ac:a5"}), keySecret, "sftp.host_key_fingerprint", "SHA-256"},
		{"short fingerprint", sftpWith(map[string]any{"host_key_fingerprint": "SHA256:abc"}), keySecret, "sftp.host_key_fingerprint", "43-character"},
		{"known_hosts missing", sftpWith(map[string]any{"known_hosts": "/nonexistent/known_hosts"}), keySecret, "sftp.known_hosts", "cannot be used"},
		{"no host", sftpWith(map[string]any{"host": nil}), keySecret, "sftp.host", "missing"},
		{"bad port", sftpWith(map[string]any{"port": 70000}), keySecret, "sftp.port", "1 to 65535"},
		{"no user", sftpWith(map[string]any{"user": nil}), keySecret, "sftp.user", "missing"},
		{"no credentials", sftpWith(map[string]any{"private_key_env": nil}), nil, "sftp.private_key_env", "missing"},
		{"key not delivered", sftpWith(nil), nil, "sftp.private_key_env", "SFTP_KEY"},
		{"key is not a key", sftpWith(nil), map[string]string{slotPrivateKey: "hunter2-not-a-key"}, "sftp.private_key_env", "does not hold a private key"},
		{"password not delivered", sftpWith(map[string]any{"private_key_env": nil, "password_env": "SFTP_PW"}), nil, "sftp.password_env", "SFTP_PW"},
		{"passphrase without key", sftpWith(map[string]any{"private_key_env": nil, "password_env": "SFTP_PW", "private_key_passphrase_env": "P"}), map[string]string{slotPassword: "pw"}, "sftp.private_key_passphrase_env", "only read with private_key_env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, tt.cfg), Secrets: tt.secrets})
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q; want path %q and %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
			for _, s := range tt.secrets {
				if strings.Contains(ce.Error(), s) {
					t.Errorf("the refusal carries a secret value: %s", ce.Error())
				}
			}
		})
	}
}

// arrivalCase is one state of the drop folder and the record it must read
// as. Both the local and the SFTP tests run these.
type arrivalCase struct {
	name    string
	content string
	age     time.Duration // how long ago the file was modified
	want    map[string]any
}

var arrivalCases = []arrivalCase{
	{"file arrived", "invoice 42: 100.00 EUR\n", 0,
		map[string]any{"size_ok": true, "fresh": true, "content_match": true}},
	{"zero-byte file", "", 0,
		map[string]any{"size_ok": false, "fresh": true, "content_match": false}},
	{"stale file", "invoice 42: 100.00 EUR\n", 3 * time.Hour,
		map[string]any{"size_ok": true, "fresh": false, "content_match": true}},
	{"wrong content", "invoice 43: 250.00 EUR\n", 0,
		map[string]any{"size_ok": true, "fresh": true, "content_match": false}},
	{"content past the first chunk", strings.Repeat("x", 200<<10) + "\ninvoice 42\n", 0,
		map[string]any{"size_ok": true, "fresh": true, "content_match": true}},
}

// arrivalConfig probes for invoice 42 in export-*.csv files modified within
// the last hour.
func arrivalConfig(root string) map[string]any {
	return map[string]any{
		"kind": Kind, "root": root, "file_pattern": "export-*.csv",
		"file_mtime_window_s": 3600, "file_content_probe": `invoice 42\b`,
	}
}

// checkArrival drops the case's file (and a file the pattern does not
// select) and checks the capture reads exactly its record.
func checkArrival(t *testing.T, c *adaptertest.Instance, root, display string, tc arrivalCase) {
	t.Helper()
	mtime := time.Now().Add(-tc.age).Truncate(time.Second)
	writeAt(t, root, "export-42.csv", tc.content, mtime)
	writeAt(t, root, "notes.txt", "invoice 42", time.Time{})
	capt, recs := captureAll(t, c, 30*time.Second)
	if !capt.Reachable {
		t.Fatalf("unreachable: %s", capt.Reason)
	}
	want := sdk.Record{
		"id": "export-42.csv", "name": "export-42.csv", "path": display,
		"size":   json.Number(fmt.Sprint(len(tc.content))),
		"mtime":  mtime.UTC().Format(time.RFC3339),
		"sha256": sum(tc.content),
	}
	maps.Copy(want, tc.want)
	if diff := cmp.Diff([]sdk.Record{want}, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestLocalArrivals(t *testing.T) {
	t.Parallel()
	for _, tc := range arrivalCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			c := configured(t, arrivalConfig(root), nil)
			checkArrival(t, c, root, filepath.Join(root, "export-42.csv"), tc)
		})
	}
}

func TestLocalOptionalFields(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeAt(t, root, "a.bin", "", time.Time{})
	writeAt(t, root, "sub/b.bin", "bee", time.Time{})
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "escape.bin")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     map[string]any
		wantIDs []string
		check   func(t *testing.T, r sdk.Record)
	}{
		{"defaults: no fresh, no content_match, empty file not ok", map[string]any{"root": root}, []string{"a.bin"},
			func(t *testing.T, r sdk.Record) {
				if _, ok := r["fresh"]; ok {
					t.Error("fresh present without file_mtime_window_s")
				}
				if _, ok := r["content_match"]; ok {
					t.Error("content_match present without file_content_probe")
				}
				if r["size_ok"] != false {
					t.Errorf("size_ok = %v for an empty file with the default minimum", r["size_ok"])
				}
			}},
		{"file_min_size 0 accepts empty", map[string]any{"root": root, "file_min_size": 0}, []string{"a.bin"},
			func(t *testing.T, r sdk.Record) {
				if r["size_ok"] != true {
					t.Errorf("size_ok = %v", r["size_ok"])
				}
			}},
		{"one level down", map[string]any{"root": root, "file_pattern": "*/*.bin", "file_min_size": 4}, []string{"sub/b.bin"},
			func(t *testing.T, r sdk.Record) {
				if r["size_ok"] != false || r["size"] != json.Number("3") {
					t.Errorf("size/size_ok = %v/%v; want 3/false under a 4-byte minimum", r["size"], r["size_ok"])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			capt, recs := captureAll(t, configured(t, tt.cfg, nil), time.Minute)
			if !capt.Reachable {
				t.Fatalf("unreachable: %s", capt.Reason)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r["id"].(string))
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Fatalf("ids (-want +got):\n%s", diff)
			}
			tt.check(t, recs[0])
		})
	}
}

func TestLocalRootGone(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "drop")
	c := configured(t, map[string]any{"root": root}, nil)
	if res, err := c.TestConnection(t.Context()); err != nil || res.Reachable {
		t.Fatalf("TestConnection on a missing root = %+v, %v; want unreachable", res, err)
	}
	capt, _ := captureAll(t, c, time.Minute)
	if capt.Reachable || !strings.Contains(capt.Reason, root) {
		t.Errorf("missing root: reachable=%v reason=%q; want unreachable naming the root", capt.Reachable, capt.Reason)
	}
	writeAt(t, root, "a", "a", time.Time{})
	if res, err := c.TestConnection(t.Context()); err != nil || !res.Reachable {
		t.Errorf("TestConnection once the root exists = %+v, %v", res, err)
	}
}

// TestLargeFileStreamed probes and hashes a 48 MiB file whose only match is
// at its end, and checks the read allocated far less than the file. Not
// parallel, so that no other test's allocations count.
func TestLargeFileStreamed(t *testing.T) {
	const size = 48 << 20
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	chunk := make([]byte, 1<<20)
	for i := range size / len(chunk) {
		for j := range chunk {
			chunk[j] = 'a' + byte((i+j)%26)
		}
		if i == size/len(chunk)-1 {
			copy(chunk[len(chunk)-16:], "\nTOTAL 4242 END\n")
		}
		if _, err := io.MultiWriter(f, want).Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c := configured(t, map[string]any{"root": root, "file_content_probe": `TOTAL \d+ END`}, nil)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, recs := captureAll(t, c, 5*time.Minute)
	runtime.ReadMemStats(&after)
	if len(recs) != 1 {
		t.Fatalf("%d records; want 1", len(recs))
	}
	if recs[0]["sha256"] != hex.EncodeToString(want.Sum(nil)) || recs[0]["content_match"] != true {
		t.Errorf("sha256/content_match = %v/%v; want %x/true", recs[0]["sha256"], recs[0]["content_match"], want.Sum(nil))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("reading a %d-byte file allocated %d bytes: it was not streamed", size, alloc)
	} else {
		t.Logf("reading %d bytes allocated %d bytes", size, alloc)
	}
}

package file

import (
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/verifierd/verifierd/internal/testservers/sshd"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func testKey(t testing.TB) []byte {
	t.Helper()
	pem, _ := sshd.NewKey(t)
	return pem
}

// sftpConfig is cfg reading root on srv, trusting its key by fingerprint and
// logging in with its authorised client key, as the daemon would send it.
func sftpConfig(srv *sshd.Server, cfg map[string]any) (map[string]any, map[string]string) {
	out := map[string]any{}
	maps.Copy(out, cfg)
	out["sftp"] = map[string]any{
		"host": srv.Host, "port": srv.Port, "user": srv.User,
		"host_key_fingerprint": srv.HostKeyFingerprint,
		"private_key_env":      "SFTP_KEY",
	}
	return out, map[string]string{slotPrivateKey: string(srv.ClientKey)}
}

// withSFTP changes keys of cfg's sftp map (nil deletes).
func withSFTP(cfg map[string]any, kv map[string]any) map[string]any {
	s := map[string]any{}
	maps.Copy(s, cfg["sftp"].(map[string]any))
	for k, v := range kv {
		if v == nil {
			delete(s, k)
		} else {
			s[k] = v
		}
	}
	out := map[string]any{}
	maps.Copy(out, cfg)
	out["sftp"] = s
	return out
}

func TestSFTPArrivals(t *testing.T) {
	t.Parallel()
	srv := sshd.Start(t)
	for _, tc := range arrivalCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			cfg, secrets := sftpConfig(srv, arrivalConfig(root))
			c := configured(t, cfg, secrets)
			checkArrival(t, c, root, root+"/export-42.csv", tc)
		})
	}
	t.Run("preflight", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		writeAt(t, root, "a.csv", "a", time.Time{})
		cfg, secrets := sftpConfig(srv, map[string]any{"root": root})
		res, err := configured(t, cfg, secrets).TestConnection(t.Context())
		if err != nil || !res.Reachable {
			t.Fatalf("TestConnection = %+v, %v", res, err)
		}
		for _, want := range []string{srv.Addr(), root, "1 entries", "pinned fingerprint"} {
			if !strings.Contains(res.Message, want) {
				t.Errorf("preflight message %q does not say %q", res.Message, want)
			}
		}
	})
	t.Run("known_hosts trust", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		writeAt(t, root, "a.csv", "a", time.Time{})
		cfg, secrets := sftpConfig(srv, map[string]any{"root": root})
		cfg = withSFTP(cfg, map[string]any{"host_key_fingerprint": nil, "known_hosts": srv.KnownHosts})
		capt, recs := captureAll(t, configured(t, cfg, secrets), 30*time.Second)
		if !capt.Reachable || len(recs) != 1 {
			t.Errorf("trusting known_hosts: reachable=%v (%s), %d records; want 1", capt.Reachable, capt.Reason, len(recs))
		}
	})
	// The server holds an Ed25519 and an ECDSA key and shows the Ed25519
	// one first; trust naming only the ECDSA key must still connect, by
	// asking for that key type.
	t.Run("trust names the server's other host key", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		writeAt(t, root, "a.csv", "a", time.Time{})
		cfg, secrets := sftpConfig(srv, map[string]any{"root": root})
		for name, trust := range map[string]map[string]any{
			"fingerprint": {"host_key_fingerprint": ssh.FingerprintSHA256(srv.ECDSAHostKey)},
			"known_hosts": {"host_key_fingerprint": nil, "known_hosts": srv.KnownHostsWith(t, srv.ECDSAHostKey)},
		} {
			capt, recs := captureAll(t, configured(t, withSFTP(cfg, trust), secrets), 30*time.Second)
			if !capt.Reachable || len(recs) != 1 {
				t.Errorf("%s of the ECDSA key: reachable=%v (%s), %d records; want 1", name, capt.Reachable, capt.Reason, len(recs))
			}
		}
	})
	t.Run("root is not a folder", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		writeAt(t, root, "a.csv", "a", time.Time{})
		cfg, secrets := sftpConfig(srv, map[string]any{"root": filepath.Join(root, "a.csv")})
		capt, _ := captureAll(t, configured(t, cfg, secrets), 30*time.Second)
		if capt.Reachable || !strings.Contains(capt.Reason, "not a folder") {
			t.Errorf("a file as root: reachable=%v reason=%q", capt.Reachable, capt.Reason)
		}
	})
}

// TestSFTPRefusals: every refusal is an unreachable read with a reason and
// no secret in it; a refused host key never reaches authentication.
func TestSFTPRefusals(t *testing.T) {
	t.Parallel()
	srv := sshd.Start(t)
	root := t.TempDir()
	writeAt(t, root, "export-42.csv", "invoice 42", time.Time{})
	_, otherHostKey := sshd.NewKey(t)
	wrongClientKey := testKey(t)
	const password = "Pa55-not-the-root-password"
	base, secrets := sftpConfig(srv, map[string]any{"root": root})

	tests := []struct {
		name     string
		sftp     map[string]any
		secrets  map[string]string
		wantWhy  string
		hostOnly bool // refused at the host key: authentication never starts
	}{
		{"unknown host key (known_hosts lists another key)", map[string]any{"host_key_fingerprint": nil, "known_hosts": srv.KnownHostsWith(t, otherHostKey)}, secrets,
			"lists another key", true},
		{"host missing from known_hosts", map[string]any{"host_key_fingerprint": nil, "known_hosts": emptyKnownHosts(t)}, secrets,
			"does not list", true},
		{"wrong pinned fingerprint", map[string]any{"host_key_fingerprint": ssh.FingerprintSHA256(otherHostKey)}, secrets,
			"not the pinned host_key_fingerprint", true},
		{"fingerprint right, known_hosts wrong", map[string]any{"known_hosts": srv.KnownHostsWith(t, otherHostKey)}, secrets,
			"lists another key", true},
		{"wrong client key", nil, map[string]string{slotPrivateKey: string(wrongClientKey)},
			"refused the credentials", false},
		{"wrong password", map[string]any{"private_key_env": nil, "password_env": "SFTP_PW"}, map[string]string{slotPassword: password},
			"refused the credentials", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := configured(t, withSFTP(base, tt.sftp), tt.secrets)
			logBefore := len(srv.Log())
			res, err := c.TestConnection(t.Context())
			if err != nil || res.Reachable {
				t.Errorf("TestConnection = %+v, %v; want unreachable", res, err)
			}
			for _, after := range []bool{false, true} {
				call := c.CaptureBefore
				if after {
					call = c.CaptureAfter
				}
				capt, err := call(t.Context(), sdk.CaptureRequest{CaptureID: "t", Timeout: 30 * time.Second})
				if err != nil {
					t.Fatalf("capture returned an error: %v", err)
				}
				recs, err := capt.Records()
				if err != nil || capt.Reachable || len(recs) != 0 {
					t.Fatalf("capture: reachable=%v, %d records, %v; want unreachable", capt.Reachable, len(recs), err)
				}
				if !strings.Contains(capt.Reason, tt.wantWhy) || !strings.Contains(capt.Reason, srv.Addr()) {
					t.Errorf("reason %q; want it to say %q and name %s", capt.Reason, tt.wantWhy, srv.Addr())
				}
				for _, s := range tt.secrets {
					if strings.Contains(capt.Reason, s) || strings.Contains(res.Message, s) {
						t.Errorf("a reason carries the secret: %q / %q", capt.Reason, res.Message)
					}
				}
			}
			serverSaw := srv.Log()[logBefore:]
			if strings.Contains(serverSaw, "Accepted publickey") || strings.Contains(serverSaw, "Starting session") {
				t.Errorf("the server accepted a login it should not have:\n%s", serverSaw)
			}
			if tt.hostOnly && (strings.Contains(serverSaw, "Failed publickey") || strings.Contains(serverSaw, "Postponed publickey")) {
				t.Errorf("the client offered credentials to a server whose host key it refused:\n%s", serverSaw)
			}
		})
	}
}

func emptyKnownHosts(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, []byte("# no hosts yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSFTPServerDown: a server that is not running is unreachable, and
// readable again once it is back.
func TestSFTPServerDown(t *testing.T) {
	t.Parallel()
	srv := sshd.Start(t)
	root := t.TempDir()
	writeAt(t, root, "export-42.csv", "invoice 42", time.Time{})
	cfg, secrets := sftpConfig(srv, map[string]any{"root": root})
	c := configured(t, cfg, secrets)
	srv.Stop()
	capt, _ := captureAll(t, c, 30*time.Second)
	if capt.Reachable || !strings.Contains(capt.Reason, "cannot connect") {
		t.Errorf("server stopped: reachable=%v reason=%q; want unreachable, cannot connect", capt.Reachable, capt.Reason)
	}
	srv.Restart(t)
	if capt, recs := captureAll(t, c, 30*time.Second); !capt.Reachable || len(recs) != 1 {
		t.Errorf("server back: reachable=%v (%s), %d records", capt.Reachable, capt.Reason, len(recs))
	}
}

// TestSFTPMidRead stops or hangs the server while a capture is reading and
// checks the capture reports the server unreachable, ended by its deadline
// rather than hanging with the server, never a shorter list of files.
func TestSFTPMidRead(t *testing.T) {
	t.Parallel()
	const files = 4000
	const deadline = 3 * time.Second
	tests := []struct {
		name    string
		act     func(srv *sshd.Server)
		wantWhy string
	}{
		{"server killed", func(srv *sshd.Server) { srv.Freeze(); srv.Stop() }, "lost"},
		{"server hung", func(srv *sshd.Server) { srv.Freeze() }, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := sshd.Start(t)
			root := t.TempDir()
			for i := range files {
				writeAt(t, root, fmt.Sprintf("export-%05d.csv", i), "invoice 42", time.Time{})
			}
			cfg, secrets := sftpConfig(srv, map[string]any{"root": root, "file_pattern": "export-*.csv"})
			c := configured(t, cfg, secrets)

			type result struct {
				capt *adaptertest.Stream
				recs []sdk.Record
				err  error
				took time.Duration
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				capt, err := c.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "mid", Timeout: deadline})
				r := result{capt: capt, err: err}
				if err == nil {
					r.recs, r.err = capt.Records()
				}
				r.took = time.Since(start)
				done <- r
			}()
			waitReading(t, srv, root+"/export-")
			tt.act(srv)
			r := <-done
			if r.err != nil {
				t.Fatalf("capture returned an error; want Reachable=false: %v", r.err)
			}
			if r.capt.Reachable {
				t.Fatalf("the read finished with %d of %d files before the server went away; the test needs a slower read", len(r.recs), files)
			}
			// The bound tells a read that ends at its deadline from one
			// that hangs with the server; it leaves a loaded machine the
			// time it needs to answer.
			if r.took > deadline+time.Minute {
				t.Errorf("the capture took %v with a %v deadline: it hung with the server", r.took, deadline)
			}
			if !strings.Contains(r.capt.Reason, tt.wantWhy) {
				t.Errorf("reason %q; want it to say %q", r.capt.Reason, tt.wantWhy)
			}
			t.Logf("unreachable after %v: %s", r.took, r.capt.Reason)
		})
	}
}

// waitReading waits until the server holds open a file whose path starts
// with prefix: the client's read is under way.
func waitReading(t *testing.T, srv *sshd.Server, prefix string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, f := range srv.OpenFiles() {
			if strings.HasPrefix(f, prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never opened a file under %s:\n%s", prefix, srv.Log())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEncryptedClientKey: a passphrase-protected key logs in with its
// passphrase; without it, or with a wrong one, the section is refused,
// naming the field and never the secret.
func TestEncryptedClientKey(t *testing.T) {
	t.Parallel()
	srv := sshd.Start(t)
	raw, err := ssh.ParseRawPrivateKey(srv.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	const passphrase = "correct horse battery staple"
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := string(pem.EncodeToMemory(block))
	root := t.TempDir()
	writeAt(t, root, "a.csv", "a", time.Time{})
	cfg, _ := sftpConfig(srv, map[string]any{"root": root})
	withPass := withSFTP(cfg, map[string]any{"private_key_passphrase_env": "SFTP_KEY_PASS"})

	c := configured(t, withPass, map[string]string{slotPrivateKey: encrypted, slotPassphrase: passphrase})
	if capt, recs := captureAll(t, c, 30*time.Second); !capt.Reachable || len(recs) != 1 {
		t.Errorf("with the passphrase: reachable=%v (%s), %d records", capt.Reachable, capt.Reason, len(recs))
	}
	for _, tc := range []struct {
		cfg      map[string]any
		secrets  map[string]string
		wantPath string
	}{
		{cfg, map[string]string{slotPrivateKey: encrypted}, slotPrivateKey},
		{withPass, map[string]string{slotPrivateKey: encrypted, slotPassphrase: "wrong"}, slotPassphrase},
	} {
		err := inProcess(t).Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, tc.cfg), Secrets: tc.secrets})
		var ce *refusal.Error
		if !errors.As(err, &ce) || ce.Path != tc.wantPath {
			t.Errorf("Configure = %v; want a refusal of %s", err, tc.wantPath)
		} else if strings.Contains(ce.Error(), passphrase) || strings.Contains(ce.Error(), "wrong") {
			t.Errorf("the refusal carries the passphrase: %s", ce.Error())
		}
	}
}

// TestSFTPConnectionReused: the reads of one instance log in once and then
// reuse the connection, so a settlement's reads, milliseconds apart, do
// not each pay for an SSH handshake (which on a loaded machine can outlast
// a read's deadline); every read still lists the server afresh. A server
// restarted between two reads drops the kept connection, and the next read
// connects again rather than failing.
func TestSFTPConnectionReused(t *testing.T) {
	t.Parallel()
	srv := sshd.Start(t)
	root := t.TempDir()
	cfg, secrets := sftpConfig(srv, map[string]any{"root": root, "file_pattern": "*.csv"})
	logins := func() int { return strings.Count(srv.Log(), "Accepted publickey") }
	before := logins()
	c := configured(t, cfg, secrets)
	for i := range 5 {
		writeAt(t, root, fmt.Sprintf("f-%d.csv", i), "x", time.Time{})
		capt, recs := captureAll(t, c, 30*time.Second)
		if !capt.Reachable || len(recs) != i+1 {
			t.Fatalf("read %d: reachable=%v (%s), %d records; want %d (a fresh listing)", i+1, capt.Reachable, capt.Reason, len(recs), i+1)
		}
	}
	if n := logins() - before; n != 1 {
		t.Errorf("5 reads logged in %d times; want once, the connection reused", n)
	}
	srv.Restart(t)
	before = logins()
	if capt, recs := captureAll(t, c, 30*time.Second); !capt.Reachable || len(recs) != 5 {
		t.Fatalf("read after a restart: reachable=%v (%s), %d records", capt.Reachable, capt.Reason, len(recs))
	}
	if n := logins() - before; n != 1 {
		t.Errorf("the read after a restart logged in %d times; want once, a new connection", n)
	}
}

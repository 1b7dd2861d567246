package client_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/client"
)

// The client module's own tests need no daemon: what Dial checks before it
// connects (gRPC connects on the first call). The tests that run Begin and
// Verify against a real daemon are in the daemon's module (e2e/client),
// since the client module does not require it.

// TestDialRefusals: Dial refuses no address, a receipt key of the wrong
// size, an unset token variable, a plaintext token off loopback and a CA
// file with no certificate, naming what to fix; it allows the token on
// loopback and, with WithInsecure or TLS, off it.
func TestDialRefusals(t *testing.T) {
	t.Setenv("CLIENT_UNIT_TOKEN", "s3cret")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name, addr, want string
		opts             []client.Option
	}{
		{"no address", "", "no address", nil},
		{"short key", "127.0.0.1:7443", "Ed25519 public key", []client.Option{client.WithReceiptKey(make(ed25519.PublicKey, 31))}},
		{"unset token", "127.0.0.1:7443", "CLIENT_UNIT_UNSET is not set", []client.Option{client.WithTokenEnv("CLIENT_UNIT_UNSET")}},
		{"plaintext off loopback", "192.0.2.1:7443", "in plaintext", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN")}},
		{"any interface", ":7443", "in plaintext", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN")}},
		{"CA file with no certificate", "127.0.0.1:7443", "holds no PEM certificate", []client.Option{client.WithTLSCA(empty)}},
		{"missing CA file", "127.0.0.1:7443", "client.WithTLSCA", []client.Option{client.WithTLSCA(filepath.Join(dir, "absent.pem"))}},
	}
	for _, tc := range refused {
		c, err := client.Dial(tc.addr, tc.opts...)
		if err == nil {
			c.Close()
			t.Errorf("%s: Dial = nil error, want a refusal naming %q", tc.name, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Dial = %v, want it to name %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: Dial's error %q holds the token", tc.name, err)
		}
	}
	allowed := []struct {
		name, addr string
		opts       []client.Option
	}{
		{"token to 127.0.0.1", "127.0.0.1:7443", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN")}},
		{"token to [::1]", "[::1]:7443", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN")}},
		{"token to localhost", "localhost:7443", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN")}},
		{"WithInsecure off loopback", "192.0.2.1:7443", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN"), client.WithInsecure()}},
		{"TLS off loopback", "192.0.2.1:7443", []client.Option{client.WithTokenEnv("CLIENT_UNIT_TOKEN"), client.WithTLS(nil)}},
		{"no token", "192.0.2.1:7443", nil},
	}
	for _, tc := range allowed {
		c, err := client.Dial(tc.addr, tc.opts...)
		if err != nil {
			t.Errorf("%s: Dial = %v, want it allowed", tc.name, err)
			continue
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s: Close = %v", tc.name, err)
		}
	}
}

package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestTokenNotSentInPlaintextToNetwork checks the transport rule on the
// parsed flags alone: nothing is dialled, so no test traffic ever leaves
// this machine (the non-loopback addresses are never contacted).
func TestTokenNotSentInPlaintextToNetwork(t *testing.T) {
	t.Setenv("VERIFYCTL_TEST_TOKEN", "s3cret")
	tests := map[string]struct {
		args    []string
		refused bool
	}{
		"non-loopback plaintext":       {[]string{"--addr", "10.0.0.5:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, true},
		"host name plaintext":          {[]string{"--addr", "verifier.example:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, true},
		"every interface plaintext":    {[]string{"--addr", ":7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, true},
		"non-loopback with --insecure": {[]string{"--addr", "10.0.0.5:7443", "--token-env", "VERIFYCTL_TEST_TOKEN", "--insecure"}, false},
		"non-loopback with --tls-ca":   {[]string{"--addr", "10.0.0.5:7443", "--token-env", "VERIFYCTL_TEST_TOKEN", "--tls-ca", "ca.pem"}, false},
		"loopback plaintext":           {[]string{"--addr", "127.0.0.1:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, false},
		"IPv6 loopback plaintext":      {[]string{"--addr", "[::1]:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, false},
		"localhost plaintext":          {[]string{"--addr", "localhost:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, false},
		"non-loopback without token":   {[]string{"--addr", "10.0.0.5:7443"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("verify", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cf clientFlags
			cf.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := cf.checkTokenTransport()
			if refused := err != nil; refused != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", refused, err, tc.refused)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the refusal shows the token: %v", err)
			}
		})
	}
}

// TestDialChecksTheTransport: the rule runs before any connection is made,
// so a refused command never dials (the address is never contacted).
func TestDialChecksTheTransport(t *testing.T) {
	t.Setenv("VERIFYCTL_TEST_TOKEN", "s3cret")
	cf := clientFlags{addr: "10.0.0.5:7443", tokenEnv: "VERIFYCTL_TEST_TOKEN"}
	conn, _, _, err := cf.dial()
	if err == nil {
		conn.Close()
		t.Fatal("dial accepted a plaintext token to a non-loopback address")
	}
	if !strings.Contains(err.Error(), "refusing to send the token") {
		t.Fatalf("dial: %v", err)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTokenNotSentInPlaintextToNetwork(t *testing.T) {
	t.Setenv("VERIFYCTL_TEST_TOKEN", "s3cret")
	tests := map[string]struct {
		args    []string
		refused bool
	}{
		"non-loopback plaintext":       {[]string{"--addr", "10.0.0.5:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, true},
		"host name plaintext":          {[]string{"--addr", "verifier.example:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, true},
		"non-loopback with --insecure": {[]string{"--addr", "10.0.0.5:7443", "--token-env", "VERIFYCTL_TEST_TOKEN", "--insecure"}, false},
		"loopback plaintext":           {[]string{"--addr", "127.0.0.1:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, false},
		"localhost plaintext":          {[]string{"--addr", "localhost:7443", "--token-env", "VERIFYCTL_TEST_TOKEN"}, false},
		"non-loopback without token":   {[]string{"--addr", "10.0.0.5:7443"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// A 1 ms deadline: an allowed dial fails fast on its own,
			// a refused one never dials.
			code := run(append([]string{"verify", "--session", "ses_x", "--timeout", "1ms"}, tc.args...), nil, &stdout, &stderr)
			refused := strings.Contains(stderr.String(), "refusing to send the token")
			if refused != tc.refused {
				t.Errorf("refused = %v (exit %d, stderr %q), want %v", refused, code, stderr.String(), tc.refused)
			}
			if refused && (code == 0 || strings.Contains(stderr.String(), "s3cret")) {
				t.Errorf("exit %d, stderr %q: want a failure that does not show the token", code, stderr.String())
			}
		})
	}
}

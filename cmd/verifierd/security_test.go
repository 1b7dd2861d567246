package main

import (
	"strings"
	"testing"
)

func TestCheckListenSecurity(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		addr                 string
		token, tls, insecure bool
		wantErr, wantWarning string
	}{
		"loopback, nothing":           {addr: "127.0.0.1:7443"},
		"localhost, nothing":          {addr: "localhost:7443"},
		"ipv6 loopback":               {addr: "[::1]:7443"},
		"loopback, token only":        {addr: "127.0.0.1:7443", token: true, wantWarning: "plaintext"},
		"all interfaces, nothing":     {addr: "0.0.0.0:7443", wantErr: "no bearer token and no TLS"},
		"empty host, nothing":         {addr: ":7443", wantErr: "--insecure"},
		"ipv6 any, nothing":           {addr: "[::]:7443", wantErr: "no bearer token and no TLS"},
		"lan, tls only":               {addr: "10.0.0.5:7443", tls: true, wantErr: "no bearer token"},
		"lan, token only":             {addr: "10.0.0.5:7443", token: true, wantErr: "travel in plaintext"},
		"hostname, token only":        {addr: "verifier.example:7443", token: true, wantErr: "travel in plaintext"},
		"lan, token and tls":          {addr: "10.0.0.5:7443", token: true, tls: true},
		"lan, nothing, --insecure":    {addr: "0.0.0.0:7443", insecure: true, wantWarning: "--insecure"},
		"lan, token only, --insecure": {addr: "0.0.0.0:7443", token: true, insecure: true, wantWarning: "plaintext"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			warning, err := checkListenSecurity(tc.addr, tc.token, tc.tls, tc.insecure)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want one naming %q", err, tc.wantErr)
			}
			if (tc.wantWarning == "") != (warning == "") || !strings.Contains(warning, tc.wantWarning) {
				t.Errorf("warning = %q, want %q", warning, tc.wantWarning)
			}
		})
	}
}

// The daemon refuses to start before opening anything.
func TestRunRefusesInsecureNonLoopback(t *testing.T) {
	t.Parallel()
	err := run([]string{"--listen", "0.0.0.0:0", "--data-dir", t.TempDir(), "--builtin-dir", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("run = %v, want the refusal naming --insecure", err)
	}
}

package main

import (
	"strings"
	"testing"
)

// Bad connection and host flags stop the daemon before anything starts,
// naming the flag.
func TestConnectionFlagsRefused(t *testing.T) {
	cases := map[string][]string{
		"--max-connections":            {"--max-connections", "0"},
		"--handshake-timeout":          {"--handshake-timeout", "0s"},
		"--idle-timeout":               {"--idle-timeout", "-1s"},
		"--http-read-timeout":          {"--http-read-timeout", "0"},
		"--min-body-rate":              {"--min-body-rate", "-1"},
		"--max-unauthenticated-per-ip": {"--max-unauthenticated-per-ip", "-1"},
		"--max-unauthenticated":        {"--max-unauthenticated", "-2"},
		"--max-streams-per-connection": {"--max-streams-per-connection", "0"},
		"--max-judge-records":          {"--max-judge-records", "-1"},
		"--http-allowed-hosts":         {"--http-allowed-hosts", "https://verifier.example/"},
	}
	for flagName, args := range cases {
		err := run(append([]string{"--data-dir", t.TempDir(), "--builtin-dir", t.TempDir()}, args...))
		if err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%v: %v, want an error naming %s", args, err, flagName)
		}
	}
}

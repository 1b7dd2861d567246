// Package testservers holds what the test-server packages below it share:
// the rule for a test whose server is not installed, the switches a test
// flips while a server serves (Setting) and a server's held answer (Hold).
// Each subpackage runs one kind of real server on loopback for tests
// (httprecords, sqlservers, sshd, smtp, and the browser-facing record
// applications screenapp and recordapp, built on webapp), and starts it
// only when a test calls it.
package testservers

import (
	"os"
	"testing"
)

// Missing stops a test that needs a server this machine does not have.
// Outside CI it skips, saying what to install; in CI (CI set in the
// environment) it fails, because CI must run every test.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed, and CI is set so the test cannot be skipped; install it: %s", what, install)
	}
	t.Skipf("%s is not installed; install it to run this test: %s (or run scripts/deps.sh)", what, install)
}

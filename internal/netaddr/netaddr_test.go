package netaddr

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestClientCopy: the client module holds its own copy of this package
// (client/internal/netaddr; the client does not require the daemon's
// module). Below the package clause the two must stay the same, so the
// client refuses a plaintext token to exactly the addresses the daemon and
// verifyctl call reachable.
func TestClientCopy(t *testing.T) {
	body := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := bytes.Cut(b, []byte("\npackage netaddr\n"))
		if !ok {
			t.Fatalf("%s has no package clause", path)
		}
		return after
	}
	ours := body("netaddr.go")
	theirs := body(filepath.Join("..", "..", "client", "internal", "netaddr", "netaddr.go"))
	if !bytes.Equal(ours, theirs) {
		t.Fatal("internal/netaddr/netaddr.go and client/internal/netaddr/netaddr.go differ below the package clause; change both")
	}
}

package signing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/receipt"
)

func TestLoadOrCreateKeepsTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1, err := LoadOrCreate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "keys", KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, fi.Mode())
	}
	s2, err := LoadOrCreate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if s1.KeyID() != s2.KeyID() || !strings.HasPrefix(s1.KeyID(), "sha256:") {
		t.Fatalf("key ids %s, %s", s1.KeyID(), s2.KeyID())
	}
	env := s2.Sign(receipt.PayloadTypeVerdict, []byte(`{}`))
	if _, err := env.Open(s1.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if a, b := s1.DerivedKey("x"), s1.DerivedKey("y"); string(a) == string(b) || len(a) != 32 {
		t.Fatal("derived keys must differ per purpose")
	}
}

func TestLoadRefusesAnOpenKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := LoadOrCreate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keys", KeyFile)
	explicit, err := LoadOrCreate(t.TempDir(), path)
	if err != nil || explicit.KeyID() != s.KeyID() {
		t.Fatalf("--signing-key: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir, ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 key: %v", err)
	}
}

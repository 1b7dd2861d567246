package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/store/pg"
)

// TestStoreAndKeyFlags: --store accepts empty, bbolt and a postgres DSN
// only; keys from env vars and files are checked and never echoed.
func TestStoreAndKeyFlags(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := openBackend("postgress://x@127.0.0.1/db", "", dir, bolt.Options{}); err == nil || !strings.Contains(err.Error(), "--store must be") {
		t.Errorf("mistyped DSN: %v", err)
	}
	if _, _, err := openBackend("", "SOME_VAR", dir, bolt.Options{}); err == nil || !strings.Contains(err.Error(), "--store-password-env") {
		t.Errorf("password env without a DSN: %v", err)
	}
	st, kind, err := openBackend("bbolt", "", dir, bolt.Options{})
	if err != nil || kind != "bbolt" {
		t.Fatalf("bbolt: %s %v", kind, err)
	}
	st.Close()

	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	t.Setenv("TEST_SIGNING", base64.StdEncoding.EncodeToString(seed))
	s, err := loadSigner("TEST_SIGNING", dir, "")
	if err != nil || s.KeyID() != signing.New(ed25519.NewKeyFromSeed(seed)).KeyID() {
		t.Fatalf("signing key from env: %v", err)
	}
	if _, err := loadSigner("TEST_SIGNING", dir, "/some/file"); err == nil {
		t.Error("both --signing-key and --signing-key-env accepted")
	}
	t.Setenv("TEST_SHORT", "c2VjcmV0LXZhbHVl") // "secret-value", 12 bytes
	for _, name := range []string{"TEST_SHORT", "TEST_UNSET"} {
		_, err := loadEvidence(name, "", dir)
		if err == nil || strings.Contains(err.Error(), "c2VjcmV0") || !strings.Contains(err.Error(), name) {
			t.Errorf("evidence key %s: %v", name, err)
		}
	}
	key := filepath.Join(dir, "evidence.key")
	if err := os.WriteFile(key, make([]byte, 32), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadEvidence("", key, dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable evidence key: %v", err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	if k, err := loadEvidence("", link, dir); err != nil || len(k) != 32 {
		t.Errorf("evidence key through a symlink (a Secret volume): %v", err)
	}
}

// TestStoreErrorsGainTheirFlags: the store names no flags; the daemon adds
// them to a PostgreSQL DSN's error, to an unset password variable, and to
// a key mismatch at start-up.
func TestStoreErrorsGainTheirFlags(t *testing.T) {
	dir := t.TempDir()
	_, _, err := openBackend("postgres://u@127.0.0.1:1/db?connect_timeout=bogus", "", dir, bolt.Options{})
	if !errors.Is(err, pg.ErrBadDSN) || !strings.HasPrefix(err.Error(), "--store: ") {
		t.Errorf("a DSN that does not parse: %v", err)
	}
	_, _, err = openBackend("postgres://u@127.0.0.1:1/db", "TEST_UNSET_STORE_PASSWORD", dir, bolt.Options{})
	if _, ok := errors.AsType[*pg.PasswordEnvError](err); !ok || !strings.HasPrefix(err.Error(), "--store-password-env: ") {
		t.Errorf("an unset password variable: %v", err)
	}

	st, _, err := openBackend("", "", dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := hclog.NewNullLogger()
	keyA, keyB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if err := bindStore(t.Context(), st, keyA, "sk_a", false, logger); err != nil {
		t.Fatal(err)
	}
	err = bindStore(t.Context(), st, keyB, "sk_a", false, logger)
	if _, ok := errors.AsType[*store.KeyMismatchError](err); !ok {
		t.Fatalf("another evidence key: %v, want a *store.KeyMismatchError", err)
	}
	for _, want := range []string{"--evidence-key", "--signing-key", "--rotate-keys", store.EvidenceKeyID(keyA), store.EvidenceKeyID(keyB)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
}

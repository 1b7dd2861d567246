// Package signing owns the daemon's signing identity: the Ed25519 key that
// signs every receipt. The daemon creates it on first start in its data dir
// (keys/receipt-signing.key, mode 0600) or loads an operator's key file, so
// that a restart keeps the identity a verifier of old receipts trusts.
package signing

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/verifierd/verifierd/receipt"
)

// KeyFile is the key's file name in <data-dir>/keys/.
const KeyFile = "receipt-signing.key"

// pemType labels the key file: the 32-byte Ed25519 seed.
const pemType = "VERIFIERD ED25519 SEED"

// Signer signs receipts with one Ed25519 key.
type Signer struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// New wraps a private key.
func New(priv ed25519.PrivateKey) *Signer {
	pub, _ := priv.Public().(ed25519.PublicKey)
	return &Signer{priv: priv, pub: pub, id: receipt.KeyID(pub)}
}

// PublicKey is the raw 32-byte public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// PublicKeyBase64 is what `verifyctl key` prints and `receipt verify
// --public-key` reads.
func (s *Signer) PublicKeyBase64() string { return base64.StdEncoding.EncodeToString(s.pub) }

// KeyID is "sha256:" and the hex SHA-256 of the raw public key.
func (s *Signer) KeyID() string { return s.id }

// Sign wraps payload in a signed DSSE envelope.
func (s *Signer) Sign(payloadType string, payload []byte) *receipt.Envelope {
	return receipt.Sign(s.priv, payloadType, payload)
}

// DerivedKey is key material derived from the signing seed for one purpose
// (HMAC-SHA-256 keyed by the seed over the purpose), so that a second secret
// needs no file of its own and no purpose can recompute another's key.
func (s *Signer) DerivedKey(purpose string) []byte {
	mac := hmac.New(sha256.New, s.priv.Seed())
	mac.Write([]byte(purpose))
	return mac.Sum(nil)
}

// LoadOrCreate returns the signer from file when given, else from
// <dataDir>/keys/receipt-signing.key, creating that key (mode 0600, its
// folder 0700) on first start. A key file readable by others is refused.
func LoadOrCreate(dataDir, file string) (*Signer, error) {
	if file != "" {
		return load(file)
	}
	dir := filepath.Join(dataDir, "keys")
	path := filepath.Join(dir, KeyFile)
	if _, err := os.Stat(path); err == nil {
		return load(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the signing key %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := write(path, priv); err != nil {
		return nil, err
	}
	return New(priv), nil
}

// write creates the key file exclusively and syncs it before it counts.
func write(path string, priv ed25519.PrivateKey) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating the signing key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: priv.Seed()})
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("creating the signing key %s: %w", path, err)
	}
	return os.Remove(tmp)
}

// load reads a key file: PEM "VERIFIERD ED25519 SEED" (what the daemon
// writes), or the 32-byte seed or 64-byte private key in base64 on one line.
func load(path string) (*Signer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the signing key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the signing key %s is readable by others (mode %04o); chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the signing key: %w", err)
	}
	var raw []byte
	if b, _ := pem.Decode(data); b != nil {
		if b.Type != pemType {
			return nil, fmt.Errorf("the signing key %s is a PEM %q block; want %q (the 32-byte Ed25519 seed)", path, b.Type, pemType)
		}
		raw = b.Bytes
	} else if raw, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(data))); err != nil {
		return nil, fmt.Errorf("the signing key %s is neither PEM nor base64", path)
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return New(ed25519.NewKeyFromSeed(raw)), nil
	case ed25519.PrivateKeySize:
		return New(ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])), nil
	}
	return nil, fmt.Errorf("the signing key %s holds %d bytes; want a 32-byte Ed25519 seed", path, len(raw))
}

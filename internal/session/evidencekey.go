package session

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/verifierd/verifierd/judge"
)

// EvidenceKeySize is the length of the per-daemon evidence key.
const EvidenceKeySize = 32

// evidenceKeys is what every keyed evidence value is made under: the
// daemon's evidence key (LoadEvidenceKey), which keys task digests, the
// hidden values of stored baselines and the evidence digests of receipts;
// or, made without one (tests), a random key that lives as long as the
// evidenceKeys.
type evidenceKeys struct {
	k []byte
}

// newEvidenceKeys holds key, or a random key when key is empty.
func newEvidenceKeys(key []byte) evidenceKeys {
	if len(key) > 0 {
		return evidenceKeys{k: key}
	}
	k := make([]byte, EvidenceKeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return evidenceKeys{k: k}
}

// key is the evidence key itself (never logged, returned or stored).
func (e evidenceKeys) key() []byte { return e.k }

// digester digests task records under the key.
func (e evidenceKeys) digester() judge.Digester { return judge.KeyedDigester(e.k) }

// keyedDigest is "hmac-sha256:" and the hex HMAC-SHA-256 of data under
// the key.
func (e evidenceKeys) keyedDigest(data []byte) string {
	mac := judge.NewKeyedHash(e.k)
	mac.Write(data)
	return judge.KeyedSum(mac)
}

// EvidenceKeyPath is where the evidence key lives inside the data dir.
func EvidenceKeyPath(dataDir string) string {
	return filepath.Join(dataDir, "keys", "evidence-hmac.key")
}

// LoadEvidenceKey returns the daemon's evidence key: the HMAC-SHA-256 key of
// reconciliation-task digests and of the hidden values in stored baselines.
// The first start generates it (crypto/rand) and writes it atomically to
// <data-dir>/keys/evidence-hmac.key (folder 0700, file 0600); later starts
// read it. A key file or folder that others may read, or a file of the wrong
// length or kind, is refused: the daemon must not start with a key that may
// have leaked, or that is not the one its stored baselines were keyed with.
// The key is never logged, returned or stored anywhere else.
func LoadEvidenceKey(dataDir string) ([]byte, error) {
	dir := filepath.Dir(EvidenceKeyPath(dataDir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the evidence key folder: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("evidence key folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder; it must be a folder with mode 0700 holding the evidence key", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o; others could read the evidence key: run chmod 700 %s", dir, st.Mode().Perm(), dir)
	}
	key, err := readEvidenceKey(EvidenceKeyPath(dataDir))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	return createEvidenceKey(dir)
}

func readEvidenceKey(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file; it must be the %d-byte evidence key with mode 0600", path, EvidenceKeySize)
	case st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s has mode %04o; others could read the evidence key: run chmod 600 %s (or, if it may have leaked, see docs/daemon.md on replacing it)", path, st.Mode().Perm(), path)
	case st.Size() != EvidenceKeySize:
		return nil, fmt.Errorf("%s holds %d bytes, not the %d of an evidence key; restore it from a backup of this data dir (a new key cannot read the baselines stored with the old one)", path, st.Size(), EvidenceKeySize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the evidence key: %w", err)
	}
	defer f.Close()
	key := make([]byte, EvidenceKeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("reading the evidence key %s: %w", path, err)
	}
	return key, nil
}

// createEvidenceKey writes a new key to a temporary file and links it into
// place, so the key file is either absent or complete, and two daemons
// starting at once end up with the same key.
func createEvidenceKey(dir string) ([]byte, error) {
	key := make([]byte, EvidenceKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating the evidence key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".evidence-hmac-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	path := filepath.Join(dir, filepath.Base(EvidenceKeyPath("")))
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readEvidenceKey(path) // another daemon won the race
		}
		return nil, fmt.Errorf("writing the evidence key: %w", err)
	}
	// Make the new name durable too; a failure here only risks the key
	// being made again after a machine crash, before any use of it lasted.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return key, nil
}

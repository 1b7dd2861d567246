package bolt

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ErrLocked is returned when another process (a running verifierd) holds
// the store.
var ErrLocked = errors.New("the store is locked by another process (is another verifierd using this data dir?)")

// lockStore opens path and takes bbolt's flock on it: exclusive for a
// writer, shared for a reader. It retries until timeout, and again when the
// path was renamed over meanwhile (a compaction), so that the lock is always
// on the current file.
func lockStore(path string, exclusive, create bool, timeout time.Duration) (*os.File, error) {
	flag, how := os.O_RDONLY, syscall.LOCK_SH
	if exclusive {
		flag, how = os.O_RDWR, syscall.LOCK_EX
	}
	if create {
		flag |= os.O_CREATE
	}
	deadline := time.Now().Add(timeout)
	for {
		f, err := os.OpenFile(path, flag, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			fi, err1 := f.Stat()
			cur, err2 := os.Stat(path)
			if err1 == nil && err2 == nil && os.SameFile(fi, cur) {
				return f, nil
			}
		}
		f.Close()
		if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking the store %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refuseEmpty returns a *CorruptError when the store file at path is
// missing or empty while the data dir's marker says a store was created
// there before: the sessions it held are gone, and starting silently with
// an empty store would answer NotFound for every one of them.
func refuseEmpty(path string) error {
	switch _, err := os.Stat(filepath.Join(filepath.Dir(path), markerFile)); {
	case errors.Is(err, os.ErrNotExist):
		return nil // a data dir that never held a store
	case err != nil:
		return fmt.Errorf("reading the store marker %s: %w", markerFile, err)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &CorruptError{Path: path, Page: -1, Empty: true,
			Problem: fmt.Sprintf("the file is missing, but %s shows that this data dir held a store", markerFile)}
	case err == nil && fi.Size() == 0:
		return &CorruptError{Path: path, Page: 0, Empty: true,
			Problem: fmt.Sprintf("the file is empty (0 bytes: page 0 is missing), but %s shows that this data dir held a store", markerFile)}
	}
	return nil
}

// writeMarker records in dir that a store was created there.
func writeMarker(dir string) error {
	id := make([]byte, 16)
	rand.Read(id)
	tmp := filepath.Join(dir, markerFile+".tmp")
	body := fmt.Sprintf("%s\ncreated %s\n", hex.EncodeToString(id), time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return fmt.Errorf("writing the store marker: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, markerFile)); err != nil {
		return fmt.Errorf("writing the store marker: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

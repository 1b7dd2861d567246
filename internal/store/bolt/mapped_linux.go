//go:build linux

package bolt

import (
	"os"
	"syscall"
	"unsafe"

	bbolt "go.etcd.io/bbolt"
)

// releaseMapped tells the kernel this process is done with the pages of
// the store's memory map that b, a value read in tx, lies on: they leave
// the daemon's resident memory (they stay in the page cache, and a later
// read maps them again). bbolt maps the file shared and read-only, so
// dropping the pages loses nothing. Only whole pages inside the mapped
// file are released; b anywhere else is left alone.
func (s *Store) releaseMapped(tx *bbolt.Tx, b []byte) {
	if len(b) == 0 {
		return
	}
	base := s.db.Info().Data
	p := unsafe.Pointer(unsafe.SliceData(b))
	start := uintptr(p)
	end := start + uintptr(len(b))
	if start < base || end > base+uintptr(tx.Size()) {
		return
	}
	ps := uintptr(os.Getpagesize())
	first := (start + ps - 1) &^ (ps - 1)
	last := end &^ (ps - 1)
	if first >= last {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, first-start)), last-first), syscall.MADV_DONTNEED)
}

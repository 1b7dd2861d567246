//go:build !linux

package bolt

import bbolt "go.etcd.io/bbolt"

// releaseMapped is a no-op where pages are not released.
func (s *Store) releaseMapped(*bbolt.Tx, []byte) {}

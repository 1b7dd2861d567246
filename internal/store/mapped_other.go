//go:build !linux

package store

import bolt "go.etcd.io/bbolt"

// releaseMapped is a no-op where pages are not released.
func (s *Store) releaseMapped(*bolt.Tx, []byte) {}

// Package keyed serialises work per key: the Verify calls of one session,
// the registration and scoring of one reward episode.
package keyed

import "sync"

// Mutex is one mutex per key. An entry lives only while a call holds or
// waits for it, so keys that are unknown, finished or evicted leave nothing
// behind. The zero Mutex is ready to use.
type Mutex struct {
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	sync.Mutex
	refs int
}

// Lock waits for key's mutex and returns the function that releases it.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.entries == nil {
		k.entries = map[string]*entry{}
	}
	e := k.entries[key]
	if e == nil {
		e = &entry{}
		k.entries[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.entries, key)
		}
		k.mu.Unlock()
	}
}

// Len reports the keys held or waited for.
func (k *Mutex) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

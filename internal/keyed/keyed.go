// Package keyed serialises work per key: the Verify calls of one session,
// the registration and scoring of one reward episode.
package keyed

import (
	"context"
	"sync"
)

// Mutex is one mutex per key. An entry lives only while a call holds or
// waits for it, so keys that are unknown, finished or evicted leave nothing
// behind. The zero Mutex is ready to use.
type Mutex struct {
	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one key's mutex: a one-slot channel, so that a waiter can give
// up when its context ends.
type entry struct {
	slot chan struct{}
	refs int
}

// Lock waits for key's mutex and returns the function that releases it. A
// wait that ctx ends returns ctx's error (and no unlock) and leaves the
// mutex as it was.
func (k *Mutex) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.entries == nil {
		k.entries = map[string]*entry{}
	}
	e := k.entries[key]
	if e == nil {
		e = &entry{slot: make(chan struct{}, 1)}
		k.entries[key] = e
	}
	e.refs++
	k.mu.Unlock()
	select {
	case e.slot <- struct{}{}:
	case <-ctx.Done():
		k.release(key, e)
		return nil, ctx.Err()
	}
	return func() {
		<-e.slot
		k.release(key, e)
	}, nil
}

// release drops one reference to key's entry, and the entry with the last.
func (k *Mutex) release(key string, e *entry) {
	k.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(k.entries, key)
	}
	k.mu.Unlock()
}

// Len reports the keys held or waited for.
func (k *Mutex) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

package session

import "github.com/verifierd/verifierd/internal/keyed"

// keyedMutex serialises work per key (Verify per session id).
type keyedMutex struct{ keyed.Mutex }

func (k *keyedMutex) lock(key string) (unlock func()) { return k.Lock(key) }

// len reports the entries held (tests read it).
func (k *keyedMutex) len() int { return k.Len() }

package session

import (
	"context"

	"github.com/verifierd/verifierd/internal/keyed"
)

// keyedMutex serialises work per key (Verify per session id).
type keyedMutex struct{ keyed.Mutex }

// lock waits for key's lock; a wait ctx ends returns ctx's error.
func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
	return k.Lock(ctx, key)
}

// len reports the entries held (tests read it).
func (k *keyedMutex) len() int { return k.Len() }

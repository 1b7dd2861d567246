package session

import (
	"crypto/sha256"
	"sync"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
)

// docCache remembers successfully parsed documents by the SHA-256 of their
// bytes. Refusals are not cached, so each one is reported afresh. When full
// it is simply emptied: the documents are few and cheap to parse again.
type docCache struct {
	mu    sync.Mutex
	max   int
	deps  map[[32]byte]*config.Deployment
	lists map[[32]byte][]judge.Effect
}

func newDocCache(max int) *docCache {
	return &docCache{max: max, deps: map[[32]byte]*config.Deployment{}, lists: map[[32]byte][]judge.Effect{}}
}

func (c *docCache) deployment(data []byte) (*config.Deployment, error) {
	key := sha256.Sum256(data)
	c.mu.Lock()
	d, ok := c.deps[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := config.ParseDeployment(data)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.deps) >= c.max {
		clear(c.deps)
	}
	c.deps[key] = d
	c.mu.Unlock()
	return d, nil
}

func (c *docCache) effects(data []byte) ([]judge.Effect, error) {
	key := sha256.Sum256(data)
	c.mu.Lock()
	l, ok := c.lists[key]
	c.mu.Unlock()
	if ok {
		return l, nil
	}
	l, err := judge.ParseEffects(data, "effects")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.lists) >= c.max {
		clear(c.lists)
	}
	c.lists[key] = l
	c.mu.Unlock()
	return l, nil
}

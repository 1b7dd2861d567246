package session

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// docCache remembers parsed documents by the SHA-256 of their bytes, so that
// a runtime sending the same deployment on every step parses it once. Only
// documents that passed every check are put in it (refusals are reported
// afresh and hold no memory), and it is bounded both by entry count and by
// the bytes of the source documents it holds, evicting the least recently
// used. The cached values are never mutated.
type docCache[V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	bytes      int
	order      *list.List // front: most recently used
	index      map[[32]byte]*list.Element
}

type docEntry[V any] struct {
	key  [32]byte
	size int
	val  V
}

func newDocCache[V any](maxEntries, maxBytes int) *docCache[V] {
	return &docCache[V]{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), index: map[[32]byte]*list.Element{}}
}

func docKey(data []byte) [32]byte { return sha256.Sum256(data) }

func (c *docCache[V]) get(key [32]byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	e, _ := el.Value.(*docEntry[V]) // only docEntry values are stored
	return e.val, true
}

// put stores a validated document. One larger than an eighth of the byte
// budget is not kept: it would evict many small ones for one reuse.
func (c *docCache[V]) put(key [32]byte, size int, v V) {
	if size > c.maxBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.index[key] = c.order.PushFront(&docEntry[V]{key: key, size: size, val: v})
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		el := c.order.Back()
		e, _ := el.Value.(*docEntry[V])
		c.order.Remove(el)
		delete(c.index, e.key)
		c.bytes -= e.size
	}
}

// stats reports the entries and bytes held (tests read it).
func (c *docCache[V]) stats() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}

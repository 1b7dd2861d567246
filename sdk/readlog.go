package sdk

import "sync"

// DefaultReadLogSize is how many reads a ReadLog with no Size remembers.
const DefaultReadLogSize = 256

// ReadLog remembers a value per capture (by CaptureRequest.CaptureID), for
// a VerdictHook that judges the read the daemon names in
// VerdictRequest.CaptureID. It keeps the last Size reads (0:
// DefaultReadLogSize) and forgets older ones, so a verdict for a read long
// past finds nothing. The zero value is ready to use and safe for
// concurrent use.
type ReadLog[T any] struct {
	// Size bounds how many reads are remembered.
	Size int

	mu    sync.Mutex
	reads map[string]T
	order []string // capture ids, oldest first
}

// Put remembers v for the read captureID, forgetting the oldest read
// beyond Size.
func (l *ReadLog[T]) Put(captureID string, v T) {
	size := l.Size
	if size <= 0 {
		size = DefaultReadLogSize
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reads == nil {
		l.reads = map[string]T{}
	}
	if _, ok := l.reads[captureID]; !ok {
		l.order = append(l.order, captureID)
	}
	l.reads[captureID] = v
	for len(l.order) > size {
		delete(l.reads, l.order[0])
		l.order = l.order[1:]
	}
}

// Get returns what was remembered for the read captureID.
func (l *ReadLog[T]) Get(captureID string) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.reads[captureID]
	return v, ok
}

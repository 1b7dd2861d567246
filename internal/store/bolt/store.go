// Package bolt is the embedded session store, the daemon's default: one
// bbolt file under the data dir, nothing to install. It implements
// store.Backend for one daemon (the file is locked) and adds what only a
// file store needs: a page-level check, compaction and salvage
// (maintain.go, check.go), used by `verifierd store`.
//
// bbolt has no notion of a context: a call checks its ctx before it starts
// each transaction and between the records it walks, so a cancelled call
// returns at the next boundary (a transaction, a chunk, a record); a
// writer queued for the single writing transaction waits its turn.
package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

var (
	bucketSessions  = []byte("sessions")
	bucketResults   = []byte("results")
	bucketBaselines = []byte("baselines")
	// bucketBegun holds, per unfinished session, when it was begun (unix
	// nanoseconds, big-endian); FinishSession removes the entry.
	bucketBegun = []byte("begun")
)

func beginStamp(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())) }

// Store is the embedded session store.
type Store struct {
	db   *bbolt.DB
	path string

	mu sync.Mutex
	// inflight holds the sessions whose baseline is being written and not
	// yet committed by CreateSession (a Begin in progress), with when the
	// first writer started: RemoveOrphans leaves their chunks alone.
	inflight map[string]time.Time

	group groupCommit

	// seal tags and checks values (nil until Bind: values pass unchecked).
	seal *store.Sealer
	// checkpointing is what SignCheckpoints set (nil: no checkpoints).
	checkpointing atomic.Pointer[store.Checkpointing]
}

var _ store.Backend = (*Store)(nil)

// Options tune the store.
type Options struct {
	// NoSync skips fsync on commit. Sessions then survive a daemon crash
	// (the kernel still holds the writes) but not a machine crash, which can
	// lose or corrupt the file; a lost session answers NotFound, never a
	// verdict. Off by default.
	NoSync bool
	// InitStore accepts a missing or empty store file in a data dir that
	// held a store before, starting afresh.
	InitStore bool
}

// Open opens (creating if needed) the store file verifierd.db in dir.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// File names in the data dir.
const (
	storeFile  = "verifierd.db"
	markerFile = "verifierd.store-id"
)

// OpenWith opens the store with options. The file is checked before bbolt
// maps it (see check.go): a damaged store is refused with a *CorruptError
// naming the file, the page and the way out, never a panic. A missing or
// empty store in a data dir whose marker file shows that it held a store
// before is refused too, unless opts.InitStore.
func OpenWith(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data dir: %w", err)
	}
	path := filepath.Join(dir, storeFile)
	if !opts.InitStore {
		if err := refuseEmpty(path); err != nil {
			return nil, err
		}
	}
	f, err := lockStore(path, true, true, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_, err = os.Stat(filepath.Join(dir, markerFile))
	hadMarker := err == nil
	if !opts.InitStore {
		// Again under the lock: the file may have changed meanwhile.
		if err := refuseEmpty(path); err != nil {
			f.Close()
			return nil, err
		}
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		if rep := checkFile(f, path); rep.Err() != nil {
			f.Close()
			return nil, rep.Err()
		}
	}
	// bbolt takes the already locked file: no other daemon can slip in
	// between the check and the open.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second, NoSync: opts.NoSync,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		return nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, inflight: map[string]time.Time{}}
	if err := s.boltCheck(); err != nil {
		db.Close()
		return nil, err
	}
	err = s.guarded(func(tx *bbolt.Tx) error {
		for _, b := range append(append([][]byte{bucketSessions, bucketResults, bucketBaselines}, ledgerBuckets...), runBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketBegun) != nil {
			return nil
		}
		// A store written before sessions carried a begin time: count
		// its unfinished sessions as begun now.
		begun, err := tx.CreateBucket(bucketBegun)
		if err != nil {
			return err
		}
		now := beginStamp(time.Now())
		results := tx.Bucket(bucketResults)
		return tx.Bucket(bucketSessions).ForEach(func(k, _ []byte) error {
			if results.Get(k) != nil {
				return nil
			}
			return begun.Put(k, now)
		})
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	if !hadMarker {
		if err := writeMarker(dir); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// boltCheck runs bbolt's own consistency check; after checkFile passed,
// every page it follows lies inside the file.
func (s *Store) boltCheck() error {
	var first error
	err := s.viewGuarded(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			if first == nil {
				first = fromBoltCheck(s.path, err)
			}
		}
		return nil
	})
	if first != nil {
		return first
	}
	return err
}

// Close closes the store file.
func (s *Store) Close() error { return s.db.Close() }

// update and view run a transaction once ctx allows, turning a panic or a
// memory fault inside bbolt (damage that appeared after the open check)
// into a *CorruptError instead of a crash.
func (s *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.guarded(fn)
}

// guarded is update without a context: a group commit's leader, and the
// offline maintenance tools.
func (s *Store) guarded(fn func(*bbolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverCorrupt(&err)
	return s.db.Update(fn)
}

func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.viewGuarded(fn)
}

// viewGuarded is view without a context, for the offline tools.
func (s *Store) viewGuarded(fn func(*bbolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverCorrupt(&err)
	return s.db.View(fn)
}

func (s *Store) recoverCorrupt(err *error) {
	if r := recover(); r != nil {
		*err = &CorruptError{Path: s.path, Page: -1, Problem: fmt.Sprintf("bbolt failed reading it: %v", r)}
	}
}

// CreateSession records a new session's metadata. The baselines' last
// chunks are committed in the same transaction, so a small session costs
// one durable write.
func (s *Store) CreateSession(ctx context.Context, id string, meta []byte, baselines ...store.BaselineWriter) error {
	return s.CreateSessionLedger(ctx, id, meta, func(store.Ledger) error { return nil }, baselines...)
}

// Session returns a session's metadata and, once verified, its result.
func (s *Store) Session(ctx context.Context, id string) (meta, result []byte, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketSessions).Get([]byte(id))
		if m == nil {
			return store.ErrNotFound
		}
		v, ok := s.seal.Open(store.PlaceSession(id), m)
		if !ok {
			return &store.IntegrityError{Session: id, What: "record"}
		}
		meta = append([]byte(nil), v...)
		if r := tx.Bucket(bucketResults).Get([]byte(id)); r != nil {
			v, ok := s.seal.Open(store.PlaceResult(id), r)
			if !ok {
				return &store.IntegrityError{Session: id, What: "result"}
			}
			result = append([]byte(nil), v...)
		}
		return nil
	})
	return meta, result, err
}

// FinishSession stores a session's result once. When a result is already
// stored (a concurrent or repeated Verify), that one is returned and kept.
func (s *Store) FinishSession(ctx context.Context, id string, result []byte) (stored []byte, err error) {
	// The baseline is no longer needed once the result is final.
	stored, _, err = s.FinishSessionLedger(ctx, id, func(store.Ledger) ([]byte, bool, error) { return result, false, nil })
	return stored, err
}

// baselineWriter appends one capture's records to a session's baseline in
// chunks, each chunk one transaction, so that a large baseline is never held
// whole in a transaction.
type baselineWriter struct {
	s       *Store
	key     []byte
	pending []byte
	n       int
	seq     uint64
	id      string
	capture int
}

// chunkBytes bounds one stored chunk.
const chunkBytes = 4 << 20

// NewBaseline starts writing capture number capture of session id.
func (s *Store) NewBaseline(id string, capture int) store.BaselineWriter {
	s.mu.Lock()
	if _, ok := s.inflight[id]; !ok {
		s.inflight[id] = time.Now()
	}
	s.mu.Unlock()
	return &baselineWriter{s: s, key: baselineKey(id, capture), id: id, capture: capture}
}

func baselineKey(id string, capture int) []byte {
	return fmt.Appendf(nil, "%s/%d", id, capture)
}

// Add appends one record (its JSON bytes).
func (w *baselineWriter) Add(ctx context.Context, rec []byte) error {
	w.pending = binary.AppendUvarint(w.pending, uint64(len(rec)))
	w.pending = append(w.pending, rec...)
	w.n++
	if len(w.pending) >= chunkBytes {
		return w.flush(ctx)
	}
	return nil
}

// Close writes what is pending in a transaction of its own. A writer handed
// to CreateSession needs no Close: its last chunk is committed there.
func (w *baselineWriter) Close(ctx context.Context) error { return w.flush(ctx) }

func (w *baselineWriter) flush(ctx context.Context) error {
	if err := w.s.update(ctx, w.commit); err != nil {
		return err
	}
	w.advance()
	return nil
}

// commit writes the pending chunk (an empty one for an empty baseline, so
// that the capture exists) inside tx. It changes nothing in w, so that a
// transaction rolled back and run again (group commit) writes the same
// chunk; advance moves on once it is committed.
func (w *baselineWriter) commit(tx *bbolt.Tx) error {
	if w.n == 0 && w.seq > 0 {
		return nil
	}
	chunk, seq := w.pending, w.seq
	parent, err := tx.Bucket(bucketBaselines).CreateBucketIfNotExists(sessionOf(w.key))
	if err != nil {
		return err
	}
	b, err := parent.CreateBucketIfNotExists(w.key)
	if err != nil {
		return err
	}
	return b.Put(binary.BigEndian.AppendUint64(nil, seq), w.s.seal.Seal(store.PlaceBaseline(w.id, w.capture, seq), chunk))
}

// advance forgets the chunk commit wrote, once it is committed.
func (w *baselineWriter) advance() {
	if w.n == 0 && w.seq > 0 {
		return
	}
	w.pending, w.n = nil, 0
	w.seq++
}

func sessionOf(key []byte) []byte {
	for i, k := range slices.Backward(key) {
		if k == '/' {
			return key[:i]
		}
	}
	return key
}

// ReadBaseline calls fn for every record of capture number capture of
// session id, in the order written. The bytes passed to fn are valid only
// during the call.
func (s *Store) ReadBaseline(ctx context.Context, id string, capture int, fn func(rec []byte) error) error {
	key := baselineKey(id, capture)
	return s.view(ctx, func(tx *bbolt.Tx) error {
		parent := tx.Bucket(bucketBaselines).Bucket([]byte(id))
		if parent == nil {
			return store.ErrNotFound
		}
		b := parent.Bucket(key)
		if b == nil {
			return store.ErrNotFound
		}
		return b.ForEach(func(k, sealed []byte) error {
			// A large baseline's pages leave resident memory as they are
			// read (fn copies what it keeps).
			defer s.releaseMapped(tx, sealed)
			if err := ctx.Err(); err != nil {
				return err
			}
			chunk, err := s.openChunk(id, capture, k, sealed)
			if err != nil {
				return err
			}
			for len(chunk) > 0 {
				n, k := binary.Uvarint(chunk)
				if k <= 0 || uint64(len(chunk)-k) < n {
					return fmt.Errorf("baseline %s is corrupt", key)
				}
				if err := fn(chunk[k : k+int(n)]); err != nil {
					return err
				}
				chunk = chunk[k+int(n):]
			}
			return nil
		})
	})
}

// DropBaseline removes every baseline capture of a session that was never
// created (a Begin that was refused part-way); a committed session's
// baseline stays.
func (s *Store) DropBaseline(ctx context.Context, id string) error {
	defer s.done(id)
	return s.update(ctx, func(tx *bbolt.Tx) error {
		bb := tx.Bucket(bucketBaselines)
		if bb.Bucket([]byte(id)) == nil || tx.Bucket(bucketSessions).Get([]byte(id)) != nil {
			return nil
		}
		return bb.DeleteBucket([]byte(id))
	})
}

// done forgets a Begin in progress: its session is committed or dropped.
func (s *Store) done(id string) {
	s.mu.Lock()
	delete(s.inflight, id)
	s.mu.Unlock()
}

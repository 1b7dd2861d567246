package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// Check checks the store in dir without changing it: the same checks and
// the same messages as Open. It takes a shared lock, so it refuses
// (ErrLocked) while a daemon holds the store. err is for a store that could
// not be checked at all; damage is in the report.
func Check(dir string) (*Report, error) { return checkTimeout(dir, time.Second) }

func checkTimeout(dir string, timeout time.Duration) (*Report, error) {
	path := filepath.Join(dir, storeFile)
	rep := &Report{Path: path}
	if err := refuseEmpty(path); err != nil {
		ce, ok := errors.AsType[*CorruptError](err)
		if !ok {
			return nil, err
		}
		rep.Problems = append(rep.Problems, ce)
		return rep, nil
	}
	f, err := lockStore(path, false, false, timeout)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		f.Close()
		rep.Notes = append(rep.Notes, "the store is empty (0 bytes) and no marker shows earlier sessions: a new store")
		return rep, nil
	}
	if rep = checkFile(f, path); rep.Err() != nil {
		f.Close()
		return rep, nil
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		return nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	defer db.Close()
	s := &Store{db: db, path: path}
	if err := s.boltCheck(); err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return nil, err
		}
		rep.Problems = append(rep.Problems, ce)
	}
	return rep, nil
}

// CompactResult describes a compaction.
type CompactResult struct {
	Sessions           int
	BytesBefore, After int64
}

// Compact rewrites the store in dir into a new file with bbolt's compaction
// and renames it over the old one. It refuses (ErrLocked) while a daemon
// holds the store, and refuses a damaged store (salvage it instead).
func Compact(dir string) (res CompactResult, err error) {
	path := filepath.Join(dir, storeFile)
	if err := refuseEmpty(path); err != nil {
		return res, err
	}
	f, err := lockStore(path, true, false, 0)
	if err != nil {
		return res, err
	}
	if rep := checkFile(f, path); rep.Err() != nil {
		f.Close()
		return res, rep.Err()
	}
	fi, _ := f.Stat()
	res.BytesBefore = fi.Size()
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		return res, fmt.Errorf("opening the store %s: %w", path, err)
	}
	// The old file stays open, and locked, until the new one has replaced it.
	defer src.Close()
	s := &Store{db: src, path: path}
	if err := s.boltCheck(); err != nil {
		return res, err
	}
	tmp := path + ".compact"
	os.Remove(tmp)
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return res, err
	}
	defer os.Remove(tmp)
	d := &Store{db: dst, path: tmp}
	if err := d.guarded(func(*bbolt.Tx) error { return nil }); err != nil {
		dst.Close()
		return res, err
	}
	err = func() (err error) {
		defer s.recoverCorrupt(&err)
		return bbolt.Compact(dst, src, 64<<20)
	}()
	if err != nil {
		dst.Close()
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	before, after := countSessions(s), countSessions(d)
	if err := dst.Close(); err != nil {
		return res, err
	}
	if before != after {
		return res, fmt.Errorf("compacting %s: %d sessions before, %d after; the store is left unchanged", path, before, after)
	}
	if err := os.Rename(tmp, path); err != nil {
		return res, err
	}
	if err := syncDir(dir); err != nil {
		return res, err
	}
	res.Sessions = before
	if fi, err := os.Stat(path); err == nil {
		res.After = fi.Size()
	}
	return res, nil
}

// verifiedResult reports whether a stored result's outcome is VERIFIED.
// A sealed result ends with its tag (checked before this is asked).
func verifiedResult(raw []byte, sealed bool) bool {
	if sealed {
		raw = store.Strip(raw)
	}
	var r struct {
		Outcome string `json:"outcome"`
	}
	return json.Unmarshal(raw, &r) == nil && r.Outcome == "VERIFIED"
}

func countSessions(s *Store) int {
	n := -1
	_ = s.viewGuarded(func(tx *bbolt.Tx) error { // n stays -1 when it fails
		if b := tx.Bucket(bucketSessions); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n
}

// SalvageReport says what Salvage copied and what was lost.
type SalvageReport struct {
	Sessions, Results, Baselines int
	// LostSessions are ids seen in the results or baselines whose session
	// record could not be read; LostResults are sessions copied without
	// their (unreadable) result, so they count as unfinished again;
	// LostBaselines are captures ("id/n") left out because some of their
	// chunks could not be read: a Verify answers INDETERMINATE for them.
	LostSessions, LostResults, LostBaselines []string
	// Damage lists the unreadable pages; records on them are lost without
	// a trace when nothing else names them.
	Damage []*CorruptError
	// LedgerEntries counts the ledger entries copied (as they were: a lost
	// page shows as a break that `verifyctl ledger verify` names);
	// LedgerIncomplete is set when some of the ledger could not be read.
	LedgerEntries    int
	LedgerIncomplete bool
	// Skipped are the sessions left out because a value of theirs fails
	// its integrity check; Damaged names every such value (reward records
	// included).
	Skipped []string
	Damaged []store.Damage
}

// Salvage copies every readable session, result and complete baseline of
// the store in dir into a fresh store in out, reading the old file page by
// page with the checker (never through bbolt, which could panic on it).
// A store whose values carry tags needs SalvageWith and its evidence key.
func Salvage(dir, out string) (*SalvageReport, error) { return SalvageWith(dir, out, nil) }

// SalvageWith is Salvage that also checks every value's tag under the
// evidence key: a session with any damaged value (record, result,
// re-verification, baseline chunk) is left out whole and listed in
// Skipped, a damaged reward record alone.
func SalvageWith(dir, out string, evidenceKey []byte) (*SalvageReport, error) {
	path := filepath.Join(dir, storeFile)
	if fi, err := os.Stat(filepath.Join(out, storeFile)); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("%s already holds a store; salvage into an empty dir", out)
	}
	if abs1, _ := filepath.Abs(dir); func() bool { abs2, _ := filepath.Abs(out); return abs1 == abs2 }() {
		return nil, errors.New("--out must be another dir than --data-dir")
	}
	f, err := lockStore(path, false, false, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &Report{Path: path}
	w, m := openFile(f, rep, true)
	res := &SalvageReport{}
	defer func() { res.Damage = rep.Problems }()
	sv := &salvager{w: w, root: int64(m.root), res: res, top: map[string][]byte{}}
	if w != nil {
		w.tree(m.root, 0, func(e elem) {
			if e.bucket {
				sv.top[string(e.key)] = e.val
			}
		})
		// Refused before anything is written to out.
		if sv.seal, err = salvageSealer(w, sv.top, sv.root, evidenceKey); err != nil {
			return nil, err
		}
	}
	dst, err := OpenWith(out, Options{InitStore: true})
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if w == nil {
		return res, nil
	}
	sv.dst = dst
	sv.readSessions()
	if err := sv.copySessions(); err != nil {
		return nil, err
	}
	if err := sv.copyBaselines(); err != nil {
		return nil, err
	}
	if err := sv.copyBuckets(); err != nil {
		return nil, err
	}
	if !sv.whole["results"] {
		for id := range sv.sessions {
			if sv.results[id] == nil {
				res.LostResults = append(res.LostResults, id)
			}
		}
	}
	res.LostSessions = slices.Sorted(maps.Keys(sv.lost))
	slices.Sort(res.LostResults)
	slices.Sort(res.LostBaselines)
	return res, nil
}

// salvager is one salvage: what was read of the damaged store (w, its
// top-level buckets, the sealer that checks its values) and the store it
// fills (dst), with what it found so far.
type salvager struct {
	w    *walker
	root int64
	top  map[string][]byte
	seal *store.Sealer
	dst  *Store
	res  *SalvageReport
	// skip are the sessions with a damaged value, skipReward the reward
	// records; sessions, results and begun the values read; whole which of
	// those buckets was read whole; lost the sessions whose meta is gone.
	skip, skipReward         map[string]bool
	sessions, results, begun map[string][]byte
	whole, lost              map[string]bool
}

// readSessions finds the damaged values and reads every session, result
// and begin stamp that is not damaged.
func (sv *salvager) readSessions() {
	sv.res.Damaged = salvageDamage(sv.w, sv.top, sv.root, sv.seal)
	sv.skip, sv.skipReward = map[string]bool{}, map[string]bool{}
	for _, d := range sv.res.Damaged {
		if d.Session != "" {
			if !sv.skip[d.Session] {
				sv.res.Skipped = append(sv.res.Skipped, d.Session)
			}
			sv.skip[d.Session] = true
		} else {
			sv.skipReward[d.What] = true
		}
	}
	sv.sessions, sv.results, sv.begun = map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	sv.whole = map[string]bool{}
	for name, into := range map[string]map[string][]byte{"sessions": sv.sessions, "results": sv.results, "begun": sv.begun} {
		if v, ok := sv.top[name]; ok {
			sv.whole[name] = sv.w.bucket(v, sv.root, func(e elem) {
				if !e.bucket {
					into[string(e.key)] = bytes.Clone(e.val)
				}
			})
		}
	}
	for id := range sv.skip {
		delete(sv.sessions, id)
		delete(sv.results, id)
	}
	sv.lost = map[string]bool{}
	for id := range sv.results {
		if sv.sessions[id] == nil {
			sv.lost[id] = true
		}
	}
}

// copySessions writes every session kept, with its result or, for an
// unfinished one, its begin stamp.
func (sv *salvager) copySessions() error {
	now := beginStamp(time.Now())
	err := sv.dst.guarded(func(tx *bbolt.Tx) error {
		for id, meta := range sv.sessions {
			if err := tx.Bucket(bucketSessions).Put([]byte(id), meta); err != nil {
				return err
			}
			if r := sv.results[id]; r != nil {
				sv.res.Results++
				if err := tx.Bucket(bucketResults).Put([]byte(id), r); err != nil {
					return err
				}
				continue
			}
			stamp := sv.begun[id]
			if len(stamp) != 8 {
				stamp = now
			}
			if err := tx.Bucket(bucketBegun).Put([]byte(id), stamp); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		sv.res.Sessions = len(sv.sessions)
	}
	return err
}

// copyBaselines writes the baselines of the sessions kept that may still
// need one (not VERIFIED), each capture only when all its chunks are there.
func (sv *salvager) copyBaselines() error {
	v, ok := sv.top["baselines"]
	if !ok {
		return nil
	}
	var ids []elem
	sv.w.bucket(v, sv.root, func(e elem) {
		if e.bucket {
			ids = append(ids, elem{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
		}
	})
	for _, sess := range ids {
		id := string(sess.key)
		if sv.skip[id] {
			continue
		}
		if sv.sessions[id] == nil {
			sv.lost[id] = true
			continue
		}
		if r := sv.results[id]; r != nil && verifiedResult(r, sv.seal != nil) {
			continue // a VERIFIED session needs no baseline; others keep it for Reverify
		}
		var caps []elem
		complete := sv.w.bucket(sess.val, sv.root, func(e elem) {
			if e.bucket {
				caps = append(caps, elem{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
			}
		})
		if !complete {
			// A capture may be missing without a trace: keep none.
			sv.res.LostBaselines = append(sv.res.LostBaselines, id+"/*")
			continue
		}
		for _, c := range caps {
			if err := sv.copyCapture(sess.key, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyCapture writes one capture of the session's baseline, or records it
// lost when a chunk is missing or out of order.
func (sv *salvager) copyCapture(session []byte, c elem) error {
	var chunks [][]byte
	next := uint64(0)
	ok := sv.w.bucket(c.val, sv.root, func(e elem) {
		if len(e.key) != 8 || binary.BigEndian.Uint64(e.key) != next {
			next = ^uint64(0)
			return
		}
		next++
		chunks = append(chunks, bytes.Clone(e.val))
	})
	if !ok || next == ^uint64(0) || len(chunks) == 0 {
		sv.res.LostBaselines = append(sv.res.LostBaselines, string(c.key))
		return nil
	}
	for i, chunk := range chunks {
		err := sv.dst.guarded(func(tx *bbolt.Tx) error {
			parent, err := tx.Bucket(bucketBaselines).CreateBucketIfNotExists(session)
			if err != nil {
				return err
			}
			b, err := parent.CreateBucketIfNotExists(c.key)
			if err != nil {
				return err
			}
			return b.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), chunk)
		})
		if err != nil {
			return err
		}
	}
	sv.res.Baselines++
	return nil
}

// copyBuckets copies the ledger, re-verifications, standalone receipts and
// the reward buckets as they are, key by key, less the damaged records.
func (sv *salvager) copyBuckets() error {
	for _, name := range append(append(append([][]byte{bucketStoreKeys}, ledgerBuckets...), rewardBuckets...), runBuckets...) {
		v, ok := sv.top[string(name)]
		if !ok {
			continue
		}
		var kvs []elem
		complete := sv.w.bucket(v, sv.root, func(e elem) {
			if !e.bucket && !skipSalvaged(string(name), e.key, sv.skip, sv.skipReward) {
				kvs = append(kvs, elem{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
			}
		})
		if string(name) == string(bucketLedger) {
			sv.res.LedgerEntries, sv.res.LedgerIncomplete = len(kvs), !complete
		}
		err := sv.dst.guarded(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if err := b.Put(kv.key, kv.val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// skipSalvaged reports whether a value of a copied bucket belongs to a
// skipped session (a re-verification) or is a damaged reward record.
func skipSalvaged(bucket string, key []byte, skip, skipReward map[string]bool) bool {
	if bucket == string(bucketReverified) {
		i := bytes.LastIndexByte(key, '/')
		return i >= 0 && skip[string(key[:i])]
	}
	_, d, ok := placeOf(bucket, nil, key)
	return ok && d.Session == "" && skipReward[d.What]
}

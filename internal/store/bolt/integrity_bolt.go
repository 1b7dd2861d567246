package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// bucketStoreKeys records, for the whole store, the key ids of its first
// writer and whether every value carries a tag (see integrity.go).
var bucketStoreKeys = []byte("store_keys")

var (
	keyEvidenceID = []byte("evidence_key_id")
	keySigningID  = []byte("signing_key_id")
	keySealed     = []byte("sealed")
)

// Bind ties the store to this daemon's keys, once, right after Open: the
// first writer's key ids are recorded; a daemon with other keys is refused
// with a *KeyMismatchError unless rotate, which records its keys instead
// (and re-tags every value when the evidence key changed). A store written
// before values carried tags is sealed as it stands. From then on every
// write tags its value and every read checks it.
func (s *Store) Bind(ctx context.Context, integrityKey []byte, keys store.Keys, rotate bool) (store.BindReport, error) {
	var rep store.BindReport
	seal := store.NewSealer(integrityKey)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		rep = store.BindReport{}
		b, err := tx.CreateBucketIfNotExists(bucketStoreKeys)
		if err != nil {
			return err
		}
		have := store.Keys{EvidenceKeyID: string(b.Get(keyEvidenceID)), SigningKeyID: string(b.Get(keySigningID))}
		sealed := string(b.Get(keySealed)) == store.SealVersion
		if have == (store.Keys{}) {
			rep.FirstWriter = true
		} else {
			rotated, err := store.CheckKeys(s.path, have, keys, rotate)
			if err != nil {
				return err
			}
			rep.Rotated = rotated
			if rotated && sealed && have.EvidenceKeyID != keys.EvidenceKeyID {
				n, err := rewriteValues(tx, func(place string, v []byte) []byte { return seal.Seal(place, store.Strip(v)) })
				if err != nil {
					return err
				}
				rep.Resealed = n
			}
		}
		if !sealed {
			n, err := rewriteValues(tx, seal.Seal)
			if err != nil {
				return err
			}
			rep.Sealed = n
			if err := b.Put(keySealed, []byte(store.SealVersion)); err != nil {
				return err
			}
		}
		if err := b.Put(keyEvidenceID, []byte(keys.EvidenceKeyID)); err != nil {
			return err
		}
		return b.Put(keySigningID, []byte(keys.SigningKeyID))
	})
	if err != nil {
		return store.BindReport{}, err
	}
	s.seal = seal
	return rep, nil
}

// openChunk checks one baseline chunk (k is its 8-byte sequence key).
func (s *Store) openChunk(id string, capture int, k, sealed []byte) ([]byte, error) {
	if s.seal == nil {
		return sealed, nil
	}
	seq := uint64(0)
	if len(k) == 8 {
		seq = binary.BigEndian.Uint64(k)
	}
	v, ok := s.seal.Open(store.PlaceBaseline(id, capture, seq), sealed)
	if !ok || len(k) != 8 {
		return nil, &store.IntegrityError{Session: id, What: fmt.Sprintf("baseline capture %d chunk %d", capture, seq)}
	}
	return v, nil
}

// openReverification checks one re-verification; num is the key's
// attempt part ("%08d").
func (s *Store) openReverification(id string, num, sealed []byte) ([]byte, error) {
	if s.seal == nil {
		return sealed, nil
	}
	attempt, err := strconv.Atoi(string(num))
	if err != nil {
		return nil, &store.IntegrityError{Session: id, What: fmt.Sprintf("re-verification %q", num)}
	}
	v, ok := s.seal.Open(store.PlaceReverification(id, attempt), sealed)
	if !ok {
		return nil, &store.IntegrityError{Session: id, What: fmt.Sprintf("re-verification %d", attempt)}
	}
	return v, nil
}

// placeOf names where a value of a checked bucket is stored, for its tag
// and for a report. bucket is the top-level bucket; for a baseline chunk
// sub is the capture bucket's key ("id/capture") and key the chunk's.
func placeOf(bucket string, sub, key []byte) (place string, d store.Damage, ok bool) {
	switch bucket {
	case string(bucketSessions):
		return store.PlaceSession(string(key)), store.Damage{Session: string(key), What: "record"}, true
	case string(bucketResults):
		return store.PlaceResult(string(key)), store.Damage{Session: string(key), What: "result"}, true
	case string(bucketReverified):
		i := bytes.LastIndexByte(key, '/')
		if i < 0 {
			return "", store.Damage{What: fmt.Sprintf("re-verification under the key %q", key)}, false
		}
		id := string(key[:i])
		attempt, err := strconv.Atoi(string(key[i+1:]))
		if err != nil {
			return "", store.Damage{Session: id, What: fmt.Sprintf("re-verification %q", key[i+1:])}, false
		}
		return store.PlaceReverification(id, attempt), store.Damage{Session: id, What: fmt.Sprintf("re-verification %d", attempt)}, true
	case string(bucketBaselines):
		id := string(sessionOf(sub))
		capture, err := strconv.Atoi(string(sub[len(id)+min(1, len(sub)-len(id)):]))
		if err != nil || len(key) != 8 {
			return "", store.Damage{Session: id, What: fmt.Sprintf("baseline chunk under the key %q", sub)}, false
		}
		seq := binary.BigEndian.Uint64(key)
		return store.PlaceBaseline(id, capture, seq), store.Damage{Session: id, What: fmt.Sprintf("baseline capture %d chunk %d", capture, seq)}, true
	}
	if bucket == string(bucketRuns) {
		return store.PlaceRun(string(key)), store.Damage{What: "run " + string(key)}, true
	}
	for _, rb := range store.RewardBuckets {
		if bucket == rb.String() {
			return store.PlaceReward(rb, string(key)), store.Damage{What: "reward record " + bucket + "/" + string(key)}, true
		}
	}
	return "", store.Damage{}, false
}

// checkedBuckets are the top-level buckets whose values carry tags.
func checkedBuckets() [][]byte {
	return append(append([][]byte{bucketSessions, bucketResults, bucketReverified, bucketBaselines}, rewardBuckets...), bucketRuns)
}

// forEachValue calls fn with every tagged value in tx: its bucket, key,
// place and damage description (ok false when the key itself is malformed).
func forEachValue(tx *bbolt.Tx, fn func(b *bbolt.Bucket, key []byte, place string, d store.Damage, ok bool, v []byte) error) error {
	for _, name := range checkedBuckets() {
		top := tx.Bucket(name)
		if top == nil {
			continue
		}
		if string(name) != string(bucketBaselines) {
			err := top.ForEach(func(k, v []byte) error {
				if v == nil {
					return nil
				}
				place, d, ok := placeOf(string(name), nil, k)
				return fn(top, k, place, d, ok, v)
			})
			if err != nil {
				return err
			}
			continue
		}
		err := top.ForEach(func(id, _ []byte) error {
			sess := top.Bucket(id)
			if sess == nil {
				return nil
			}
			return sess.ForEach(func(capKey, _ []byte) error {
				cb := sess.Bucket(capKey)
				if cb == nil {
					return nil
				}
				return cb.ForEach(func(k, v []byte) error {
					place, d, ok := placeOf(string(name), capKey, k)
					return fn(cb, k, place, d, ok, v)
				})
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rewriteValues replaces every tagged value v by with(place, v) and
// returns how many it rewrote.
func rewriteValues(tx *bbolt.Tx, with func(place string, v []byte) []byte) (int, error) {
	type put struct {
		b    *bbolt.Bucket
		k, v []byte
	}
	var puts []put
	err := forEachValue(tx, func(b *bbolt.Bucket, k []byte, place string, _ store.Damage, ok bool, v []byte) error {
		if !ok {
			return nil // a malformed key: left as it is, and reported by a check
		}
		puts = append(puts, put{b: b, k: bytes.Clone(k), v: with(place, v)})
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, p := range puts {
		if err := p.b.Put(p.k, p.v); err != nil {
			return 0, err
		}
	}
	return len(puts), nil
}

// recordedKeys reads the key ids and sealed mark of a store.
func recordedKeys(tx *bbolt.Tx) (store.Keys, bool) {
	b := tx.Bucket(bucketStoreKeys)
	if b == nil {
		return store.Keys{}, false
	}
	return store.Keys{EvidenceKeyID: string(b.Get(keyEvidenceID)), SigningKeyID: string(b.Get(keySigningID))}, string(b.Get(keySealed)) == store.SealVersion
}

// CheckValues checks every tagged value of the store in dir under the
// evidence key, read-only (it refuses, ErrLocked, while a daemon holds the
// store). Run it after Check found the file sound: it reads through bbolt.
func CheckValues(dir string, evidenceKey []byte) (*store.ValueReport, error) {
	path := filepath.Join(dir, storeFile)
	if err := refuseEmpty(path); err != nil {
		return nil, err
	}
	f, err := lockStore(path, false, false, time.Second)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		f.Close()
		return &store.ValueReport{}, nil
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	defer db.Close()
	s := &Store{db: db, path: path}
	rep := &store.ValueReport{}
	err = s.viewGuarded(func(tx *bbolt.Tx) error {
		rep.Keys, rep.Sealed = recordedKeys(tx)
		if err := checkValuesTx(tx, rep, evidenceKey); err != nil {
			return err
		}
		rep.Ledger = checkLedgerTx(tx, rep.Keys.SigningKeyID)
		return nil
	})
	return rep, err
}

// checkLedgerTx checks the ledger's chain and signed checkpoints in tx.
func checkLedgerTx(tx *bbolt.Tx, signingKeyID string) store.LedgerReport {
	c := store.NewLedgerChecker(signingKeyID)
	if b := tx.Bucket(bucketCheckpoints); b != nil {
		_ = b.ForEach(func(k, v []byte) error {
			if len(k) == 8 {
				c.Checkpoint(binary.BigEndian.Uint64(k), v)
			}
			return nil
		})
	}
	if b := tx.Bucket(bucketLedger); b != nil {
		_ = b.ForEach(func(k, v []byte) error {
			if len(k) == 8 {
				c.Entry(binary.BigEndian.Uint64(k), v)
			}
			return nil
		})
	}
	return c.Report()
}

func checkValuesTx(tx *bbolt.Tx, rep *store.ValueReport, evidenceKey []byte) error {
	seal := store.CheckSealer(rep, evidenceKey)
	if rep.Problem != "" {
		return nil
	}
	return forEachValue(tx, func(_ *bbolt.Bucket, _ []byte, place string, d store.Damage, ok bool, v []byte) error {
		if !ok && seal != nil {
			rep.Values++
			rep.Damaged = append(rep.Damaged, d)
			return nil
		}
		rep.Check(seal, place, d, v)
		return nil
	})
}

// salvageSealer returns the sealer that checks a salvaged store's values
// (nil for a store not yet sealed) from its store_keys bucket as the walker
// reads it, or an error when the store is sealed and the key cannot check
// it.
func salvageSealer(w *walker, top map[string][]byte, rootPage int64, evidenceKey []byte) (*store.Sealer, error) {
	v, ok := top[string(bucketStoreKeys)]
	if !ok {
		return nil, nil
	}
	kv := map[string]string{}
	used, problems := slices.Clone(w.used), len(w.rep.Problems)
	defer func() {
		copy(w.used, used)
		w.rep.Problems = w.rep.Problems[:problems]
	}()
	w.bucket(v, rootPage, func(e elem) {
		if !e.bucket {
			kv[string(e.key)] = string(e.val)
		}
	})
	if kv[string(keySealed)] != store.SealVersion {
		return nil, nil
	}
	if evidenceKey == nil {
		return nil, fmt.Errorf("%w: the store's values carry tags keyed by it, and none was given", store.ErrEvidenceKey)
	}
	if id := store.EvidenceKeyID(evidenceKey); id != kv[string(keyEvidenceID)] {
		return nil, fmt.Errorf("%w: the evidence key given (%s) is not the store's (%s)", store.ErrEvidenceKey, id, kv[string(keyEvidenceID)])
	}
	return store.NewSealer(store.IntegrityKey(evidenceKey)), nil
}

// salvageDamage walks every tagged value the walker can read and returns
// the damaged ones; the sessions among them are left out of the salvaged
// store whole, a damaged reward record alone.
func salvageDamage(w *walker, top map[string][]byte, rootPage int64, seal *store.Sealer) []store.Damage {
	if seal == nil {
		return nil
	}
	// This pass reads pages the copy reads again: the walker forgets it.
	used, problems := slices.Clone(w.used), len(w.rep.Problems)
	defer func() {
		copy(w.used, used)
		w.rep.Problems = w.rep.Problems[:problems]
	}()
	var out []store.Damage
	check := func(name string, sub []byte, e elem) {
		place, d, ok := placeOf(name, sub, e.key)
		if !ok {
			out = append(out, d)
			return
		}
		if _, good := seal.Open(place, e.val); !good {
			out = append(out, d)
		}
	}
	for _, name := range checkedBuckets() {
		v, ok := top[string(name)]
		if !ok {
			continue
		}
		if string(name) != string(bucketBaselines) {
			w.bucket(v, rootPage, func(e elem) {
				if !e.bucket {
					check(string(name), nil, e)
				}
			})
			continue
		}
		var sessions []elem
		w.bucket(v, rootPage, func(e elem) {
			if e.bucket {
				sessions = append(sessions, elem{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
			}
		})
		for _, sess := range sessions {
			var caps []elem
			w.bucket(sess.val, rootPage, func(e elem) {
				if e.bucket {
					caps = append(caps, elem{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
				}
			})
			for _, c := range caps {
				w.bucket(c.val, rootPage, func(e elem) {
					if !e.bucket {
						check(string(name), c.key, e)
					}
				})
			}
		}
	}
	return out
}

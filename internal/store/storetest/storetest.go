// Package storetest is the conformance suite of the store contract
// (internal/store): every backend runs Exercise from its own tests, against
// a real store, and must pass all of it. What the suite cannot do through
// the contract (open a fresh store, damage a stored value behind the
// store's back) the backend supplies in a Backend.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// Backend is a backend under test.
type Backend struct {
	// Open returns a new, empty store, closed when t ends.
	Open func(t *testing.T) store.Backend
	// Damage changes one byte of a stored value behind the store's back
	// (what a disk fault or a hand edit would do).
	Damage func(t *testing.T, s store.Backend, v Value)
}

// Value names one stored value, for Backend.Damage.
type Value struct {
	Kind    Kind
	Session string
	Attempt int // KindReverification
	Capture int // KindBaseline (its first chunk)
	Bucket  store.RewardBucket
	Key     string // KindReward; the run id for KindRun
}

// Kind is a kind of stored value.
type Kind int

// The kinds of stored values a tag guards.
const (
	KindSession Kind = iota
	KindResult
	KindReverification
	KindBaseline
	KindReward
	KindRun
)

func (k Kind) String() string {
	return [...]string{"record", "result", "re-verification", "baseline chunk", "reward record", "run"}[k]
}

// Exercise runs the conformance suite against b: every part on a store of
// its own.
func Exercise(t *testing.T, b Backend) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"Sessions", testSessions},
		{"Baselines", testBaselines},
		{"Reverifications", testReverifications},
		{"Ledger", testLedger},
		{"LedgerRollback", testLedgerRollback},
		{"LedgerExportInBatches", testLedgerExport},
		{"Checkpoints", testCheckpoints},
		{"Retention", testRetention},
		{"Orphans", testOrphans},
		{"Reward", testReward},
		{"Integrity", testIntegrity},
		{"Keys", testKeys},
		{"ConcurrentFinish", testConcurrentFinish},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Cancelled", testCancelled},
		{"Runs", testRuns},
		{"ConcurrentRunUpdates", testConcurrentRunUpdates},
		{"RunHolds", testRunHolds},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, b) })
	}
}

// appendEntry is a ledger function that appends one entry.
func appendEntry(typ, session string) func(store.Ledger) error {
	return func(l store.Ledger) error {
		_, err := l.Append(typ, session, "sha256:"+strings.Repeat("0", 64))
		return err
	}
}

func noEntry(store.Ledger) error { return nil }

func create(t *testing.T, s store.Backend, id string, meta string, ws ...store.BaselineWriter) {
	t.Helper()
	if err := s.CreateSessionLedger(t.Context(), id, []byte(meta), appendEntry("begin", id), ws...); err != nil {
		t.Fatalf("creating session %s: %v", id, err)
	}
}

func finish(t *testing.T, s store.Backend, id, result string, keep bool) []byte {
	t.Helper()
	stored, built, err := s.FinishSessionLedger(t.Context(), id, func(l store.Ledger) ([]byte, bool, error) {
		return []byte(result), keep, appendEntry("verify", id)(l)
	})
	if err != nil {
		t.Fatalf("finishing session %s: %v", id, err)
	}
	if !built {
		t.Fatalf("finishing session %s: built false for the first result", id)
	}
	return stored
}

func baseline(t *testing.T, s store.Backend, id string, capture int, recs ...string) store.BaselineWriter {
	t.Helper()
	w := s.NewBaseline(id, capture)
	for _, r := range recs {
		if err := w.Add(t.Context(), []byte(r)); err != nil {
			t.Fatalf("adding a record to %s/%d: %v", id, capture, err)
		}
	}
	return w
}

func readBaseline(t *testing.T, s store.Backend, id string, capture int) ([]string, error) {
	t.Helper()
	var out []string
	err := s.ReadBaseline(t.Context(), id, capture, func(rec []byte) error {
		out = append(out, string(rec))
		return nil
	})
	return out, err
}

func exportAll(t *testing.T, s store.Backend, from uint64) []receipt.Entry {
	t.Helper()
	var out []receipt.Entry
	err := s.ExportLedger(t.Context(), from, func(e receipt.Entry, canonical []byte) error {
		if !bytes.Equal(canonical, e.Canonical()) {
			t.Errorf("entry %d: the exported bytes are not its canonical form", e.Seq)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("exporting the ledger: %v", err)
	}
	return out
}

// checkChain verifies the whole ledger and that its head is LedgerHead.
func checkChain(t *testing.T, s store.Backend, want int) []receipt.Entry {
	t.Helper()
	entries := exportAll(t, s, 1)
	if len(entries) != want {
		t.Fatalf("the ledger holds %d entries, want %d", len(entries), want)
	}
	head, err := receipt.VerifyChain(entries, false)
	if err != nil {
		t.Fatalf("the ledger's chain: %v", err)
	}
	pos, err := s.LedgerHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pos.Seq != uint64(want)+1 || (want > 0 && pos.Head != head) || (want == 0 && pos.Head != receipt.Genesis) {
		t.Fatalf("LedgerHead = %+v, want seq %d head %s", pos, want+1, head)
	}
	return entries
}

func testSessions(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	if _, _, err := s.Session(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Session of an unknown id: %v, want ErrNotFound", err)
	}
	create(t, s, "s1", `{"m":1}`)
	if err := s.CreateSessionLedger(ctx, "s1", []byte(`{"m":"again"}`), appendEntry("begin", "s1")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("creating s1 twice: %v, want ErrExists", err)
	}
	meta, result, err := s.Session(ctx, "s1")
	if err != nil || string(meta) != `{"m":1}` || result != nil {
		t.Fatalf("Session(s1) = %q, %q, %v; want the first meta and no result", meta, result, err)
	}
	// An error from the ledger function stores nothing.
	refuse := errors.New("refused")
	if err := s.CreateSessionLedger(ctx, "s2", []byte(`{}`), func(l store.Ledger) error {
		if err := appendEntry("begin", "s2")(l); err != nil {
			return err
		}
		return refuse
	}); !errors.Is(err, refuse) {
		t.Fatalf("a refusing ledger function: %v, want its error", err)
	}
	if _, _, err := s.Session(ctx, "s2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused create left session s2: %v", err)
	}

	stored := finish(t, s, "s1", `{"r":1}`, false)
	if string(stored) != `{"r":1}` {
		t.Fatalf("FinishSessionLedger stored %q", stored)
	}
	called := false
	again, built, err := s.FinishSessionLedger(ctx, "s1", func(store.Ledger) ([]byte, bool, error) {
		called = true
		return []byte(`{"r":2}`), false, nil
	})
	if err != nil || built || called || string(again) != `{"r":1}` {
		t.Fatalf("a second finish: %q built=%v called=%v %v; want the first result, built false, build not called", again, built, called, err)
	}
	if _, _, err := s.FinishSessionLedger(ctx, "nope", func(store.Ledger) ([]byte, bool, error) { return []byte(`{}`), false, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finishing an unknown session: %v, want ErrNotFound", err)
	}
	if _, result, _ := s.Session(ctx, "s1"); string(result) != `{"r":1}` {
		t.Fatalf("Session(s1) result %q", result)
	}

	create(t, s, "s0", `{"m":0}`)
	var ids []string
	err = s.ForEachSession(ctx, func(id string, meta, result []byte) error {
		ids = append(ids, fmt.Sprintf("%s %s %s", id, meta, result))
		return nil
	})
	if want := []string{`s0 {"m":0} `, `s1 {"m":1} {"r":1}`}; err != nil || !slices.Equal(ids, want) {
		t.Fatalf("ForEachSession: %q, %v; want %q", ids, err, want)
	}
	stop := errors.New("stop")
	if err := s.ForEachSession(ctx, func(string, []byte, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ForEachSession with a failing fn: %v", err)
	}
	// begin s1, verify s1, begin s0 (the refused s2 left nothing).
	entries := checkChain(t, s, 3)
	if entries[0].Session != "s1" || entries[1].Type != "verify" || entries[2].Session != "s0" {
		t.Fatalf("ledger entries %+v", entries)
	}

	// A stand-alone receipt: replaced under the same key.
	for i := range 2 {
		out, err := s.PutReceipt(ctx, "refusal/1", func(l store.Ledger) ([]byte, error) {
			return fmt.Appendf(nil, `{"receipt":%d}`, i), appendEntry("refusal", "")(l)
		})
		if err != nil || string(out) != fmt.Sprintf(`{"receipt":%d}`, i) {
			t.Fatalf("PutReceipt %d: %q %v", i, out, err)
		}
	}
	checkChain(t, s, 5)
}

func testBaselines(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	// Records larger in sum than any backend's chunk, so the writer stores
	// chunks as it goes.
	big := strings.Repeat("x", 64<<10)
	var recs []string
	for i := range 100 {
		recs = append(recs, fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big))
	}
	w := baseline(t, s, "s1", 0, recs...)
	census := baseline(t, s, "s1", store.CensusCapture(0), `{"census":1}`)
	empty := s.NewBaseline("s1", 1)
	create(t, s, "s1", `{}`, w, census, empty)
	got, err := readBaseline(t, s, "s1", 0)
	if err != nil || !slices.Equal(got, recs) {
		t.Fatalf("ReadBaseline(s1/0): %d records (%v), want the %d written in order", len(got), err, len(recs))
	}
	if got, err := readBaseline(t, s, "s1", store.CensusCapture(0)); err != nil || !slices.Equal(got, []string{`{"census":1}`}) {
		t.Fatalf("the census capture: %q %v", got, err)
	}
	if got, err := readBaseline(t, s, "s1", 1); err != nil || len(got) != 0 {
		t.Fatalf("an empty baseline: %q %v; want no records and no error", got, err)
	}
	if _, err := readBaseline(t, s, "s1", 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a capture never written: %v, want ErrNotFound", err)
	}
	stop := errors.New("stop")
	if err := s.ReadBaseline(ctx, "s1", 0, func([]byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ReadBaseline with a failing fn: %v", err)
	}

	// DropBaseline removes an uncommitted baseline and keeps a committed one.
	w2 := baseline(t, s, "s2", 0, `{"a":1}`)
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.DropBaseline(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := readBaseline(t, s, "s2", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a dropped baseline is still there: %v", err)
	}
	if err := s.DropBaseline(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got, err := readBaseline(t, s, "s1", 0); err != nil || len(got) != len(recs) {
		t.Fatalf("DropBaseline removed a committed session's baseline: %d records, %v", len(got), err)
	}

	// A result that keeps its baseline keeps it; one that does not removes it.
	create(t, s, "s3", `{}`, baseline(t, s, "s3", 0, `{"b":1}`))
	finish(t, s, "s1", `{}`, true)
	finish(t, s, "s3", `{}`, false)
	if got, err := readBaseline(t, s, "s1", 0); err != nil || len(got) != len(recs) {
		t.Fatalf("a kept baseline: %d records, %v", len(got), err)
	}
	if _, err := readBaseline(t, s, "s3", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a finished session's baseline was kept: %v", err)
	}
}

func testReverifications(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	create(t, s, "s1", `{}`, baseline(t, s, "s1", 0, `{"a":1}`))
	reverify := func(keep bool) (int, error) {
		var n int
		_, err := s.AddReverification(ctx, "s1", func(l store.Ledger, attempt int) ([]byte, bool, error) {
			n = attempt
			return fmt.Appendf(nil, `{"attempt":%d}`, attempt), keep, appendEntry("reverify", "s1")(l)
		})
		return n, err
	}
	if _, err := reverify(true); err == nil {
		t.Fatal("a re-verification of an unfinished session was stored")
	}
	if _, err := s.AddReverification(ctx, "nope", func(store.Ledger, int) ([]byte, bool, error) { return nil, false, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("re-verifying an unknown session: %v, want ErrNotFound", err)
	}
	finish(t, s, "s1", `{"first":true}`, true)
	for want := 1; want <= 2; want++ {
		if n, err := reverify(want == 1); err != nil || n != want {
			t.Fatalf("re-verification %d: attempt %d, %v", want, n, err)
		}
	}
	more, err := s.Reverifications(ctx, "s1")
	if err != nil || len(more) != 2 || string(more[0]) != `{"attempt":1}` || string(more[1]) != `{"attempt":2}` {
		t.Fatalf("Reverifications: %q %v", more, err)
	}
	if _, result, _ := s.Session(ctx, "s1"); string(result) != `{"first":true}` {
		t.Fatalf("the first result changed: %q", result)
	}
	if _, err := readBaseline(t, s, "s1", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the baseline outlived a re-verification that did not keep it: %v", err)
	}
	if more, err := s.Reverifications(ctx, "nope"); err != nil || len(more) != 0 {
		t.Fatalf("Reverifications of an unknown session: %q %v", more, err)
	}
	checkChain(t, s, 4)
}

func testLedger(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	checkChain(t, s, 0)
	var seen []receipt.Position
	err := s.AppendLedger(ctx, func(l store.Ledger) error {
		for i := range 3 {
			before := l.Next()
			e, err := l.Append("test", fmt.Sprint(i), "sha256:"+strings.Repeat("1", 64))
			if err != nil {
				return err
			}
			if e.Seq != before.Seq || e.Prev != before.Head {
				return fmt.Errorf("entry %+v does not take Next %+v", e, before)
			}
			seen = append(seen, l.Next())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	entries := checkChain(t, s, 3)
	if seen[2].Seq != 4 || seen[2].Head != entries[2].Hash() {
		t.Fatalf("Next after three appends: %+v", seen[2])
	}
	if tail := exportAll(t, s, 2); len(tail) != 2 || tail[0].Seq != 2 {
		t.Fatalf("ExportLedger from 2: %+v", tail)
	}
	stop := errors.New("stop")
	if err := s.ExportLedger(ctx, 1, func(receipt.Entry, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ExportLedger with a failing fn: %v", err)
	}
}

func testLedgerRollback(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	refuse := errors.New("refused")
	if err := s.AppendLedger(ctx, func(l store.Ledger) error {
		if err := appendEntry("test", "")(l); err != nil {
			return err
		}
		return refuse
	}); !errors.Is(err, refuse) {
		t.Fatalf("AppendLedger: %v, want the function's error", err)
	}
	if _, err := s.PutReceipt(ctx, "k", func(l store.Ledger) ([]byte, error) {
		return nil, errors.Join(appendEntry("test", "")(l), refuse)
	}); !errors.Is(err, refuse) {
		t.Fatalf("PutReceipt: %v, want the function's error", err)
	}
	create(t, s, "s1", `{}`)
	if _, _, err := s.FinishSessionLedger(ctx, "s1", func(l store.Ledger) ([]byte, bool, error) {
		return []byte(`{}`), false, errors.Join(appendEntry("verify", "s1")(l), refuse)
	}); !errors.Is(err, refuse) {
		t.Fatalf("FinishSessionLedger: %v, want the function's error", err)
	}
	if _, result, _ := s.Session(ctx, "s1"); result != nil {
		t.Fatalf("a refused finish stored %q", result)
	}
	// Only s1's begin entry is stored.
	checkChain(t, s, 1)
}

func testLedgerExport(t *testing.T, b Backend) {
	s := b.Open(t)
	n := store.ExportBatch*2 + 3
	if err := s.AppendLedger(t.Context(), func(l store.Ledger) error {
		for range n {
			if err := appendEntry("test", "")(l); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkChain(t, s, n)
	if tail := exportAll(t, s, uint64(store.ExportBatch)); len(tail) != n-store.ExportBatch+1 {
		t.Fatalf("ExportLedger from %d: %d entries, want %d", store.ExportBatch, len(tail), n-store.ExportBatch+1)
	}
}

func testCheckpoints(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	if seq, env, err := s.LatestCheckpoint(ctx); err != nil || seq != 0 || env != nil {
		t.Fatalf("LatestCheckpoint of an empty store: %d %q %v", seq, env, err)
	}
	var mu sync.Mutex
	signed := map[uint64]string{}
	s.SignCheckpoints(&store.Checkpointing{Every: 3, Sign: func(seq uint64, head string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		signed[seq] = head
		return fmt.Appendf(nil, `{"seq":%d,"head":%q}`, seq, head), nil
	}})
	for i := range 7 {
		create(t, s, fmt.Sprintf("s%d", i), `{}`)
	}
	entries := checkChain(t, s, 7)
	seq, env, err := s.LatestCheckpoint(ctx)
	if err != nil || seq != 6 || string(env) != fmt.Sprintf(`{"seq":6,"head":%q}`, entries[5].Hash()) {
		t.Fatalf("LatestCheckpoint = %d %s %v; want the checkpoint of seq 6", seq, env, err)
	}
	if signed[3] != entries[2].Hash() {
		t.Fatalf("the checkpoint at seq 3 signed head %q, want %q", signed[3], entries[2].Hash())
	}
	// Entries 8 and 9 in a transaction that fails: no checkpoint 9.
	if err := s.AppendLedger(ctx, func(l store.Ledger) error {
		for range 2 {
			if err := appendEntry("test", "")(l); err != nil {
				return err
			}
		}
		return errors.New("refused")
	}); err == nil {
		t.Fatal("a refusing append: no error")
	}
	if seq, _, err := s.LatestCheckpoint(ctx); err != nil || seq != 6 {
		t.Fatalf("a rolled back append left checkpoint %d (%v)", seq, err)
	}
	// A failing signer fails the append: no entry runs past a checkpoint
	// it could not sign.
	s.SignCheckpoints(&store.Checkpointing{Every: 8, Sign: func(uint64, string) ([]byte, error) { return nil, errors.New("no key") }})
	if err := s.AppendLedger(ctx, appendEntry("test", "")); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("an append whose checkpoint could not be signed: %v", err)
	}
	checkChain(t, s, 7)
	s.SignCheckpoints(nil)
	if err := s.PutCheckpoint(ctx, 7, []byte(`{"first":7}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckpoint(ctx, 7, []byte(`{"second":7}`)); err != nil {
		t.Fatal(err)
	}
	if seq, env, err := s.LatestCheckpoint(ctx); err != nil || seq != 7 || string(env) != `{"first":7}` {
		t.Fatalf("LatestCheckpoint after two puts at 7: %d %s %v; the first stays", seq, env, err)
	}
}

// expiring is more sessions than a backend removes in one transaction.
const expiring = 40

func testRetention(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	for i := range expiring {
		id := fmt.Sprintf("old-%02d", i)
		create(t, s, id, `{}`, baseline(t, s, id, 0, `{"a":1}`))
		finish(t, s, id, `{}`, true)
		if _, err := s.AddReverification(ctx, id, func(l store.Ledger, _ int) ([]byte, bool, error) {
			return []byte(`{}`), true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	create(t, s, "open", `{}`)
	if n, err := s.RemoveExpired(ctx, time.Now(), 0); err != nil || n != 0 {
		t.Fatalf("RemoveExpired with retain 0: %d %v; it keeps everything", n, err)
	}
	if n, err := s.RemoveExpired(ctx, time.Now(), time.Hour); err != nil || n != 0 {
		t.Fatalf("RemoveExpired of a fresh result: %d %v", n, err)
	}
	n, err := s.RemoveExpired(ctx, time.Now().Add(2*time.Hour), time.Hour)
	if err != nil || n != expiring {
		t.Fatalf("RemoveExpired two hours on: removed %d (%v), want %d", n, err, expiring)
	}
	for _, id := range []string{"old-00", fmt.Sprintf("old-%02d", expiring-1)} {
		if _, _, err := s.Session(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired session %s is still there: %v", id, err)
		}
		if more, err := s.Reverifications(ctx, id); err != nil || len(more) != 0 {
			t.Fatalf("expired session %s's re-verifications are still there: %d %v", id, len(more), err)
		}
		if _, err := readBaseline(t, s, id, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired session %s's baseline is still there: %v", id, err)
		}
	}
	var left []string
	if err := s.ForEachSession(ctx, func(id string, _, _ []byte) error { left = append(left, id); return nil }); err != nil || !slices.Equal(left, []string{"open"}) {
		t.Fatalf("sessions left: %q %v; want only the unfinished one", left, err)
	}
	// The ledger stays whole: begin and verify of every old one, begin of open.
	checkChain(t, s, 2*expiring+1)
}

func testOrphans(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	// An uncommitted baseline, stored in full (a Begin killed after its
	// capture), and a committed but never verified session.
	w := baseline(t, s, "orphan", 0, `{"a":1}`)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	create(t, s, "unfinished", `{}`, baseline(t, s, "unfinished", 0, `{"b":1}`))
	create(t, s, "done", `{}`, baseline(t, s, "done", 0, `{"c":1}`))
	finish(t, s, "done", `{}`, true)

	// Now: the orphan may still be a Begin in progress; nothing goes.
	st, err := s.RemoveOrphans(ctx, time.Now(), time.Hour)
	if err != nil || st != (store.Stats{}) {
		t.Fatalf("RemoveOrphans now: %+v %v; want nothing removed", st, err)
	}
	// Well past the retention: the orphan chunks and the unfinished session go.
	st, err = s.RemoveOrphans(ctx, time.Now().Add(48*time.Hour), time.Hour)
	if err != nil || st != (store.Stats{OrphanBaselines: 1, UnfinishedSessions: 1}) {
		t.Fatalf("RemoveOrphans two days on: %+v %v; want one orphan baseline and one unfinished session", st, err)
	}
	if _, _, err := s.Session(ctx, "unfinished"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the unfinished session is still there: %v", err)
	}
	if _, err := readBaseline(t, s, "unfinished", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the unfinished session's baseline is still there: %v", err)
	}
	if got, err := readBaseline(t, s, "done", 0); err != nil || len(got) != 1 {
		t.Fatalf("a finished session's kept baseline went: %q %v", got, err)
	}
	// The orphan's chunks are gone: a session of that id starts afresh.
	create(t, s, "orphan", `{}`, baseline(t, s, "orphan", 0, `{"fresh":1}`))
	if got, err := readBaseline(t, s, "orphan", 0); err != nil || !slices.Equal(got, []string{`{"fresh":1}`}) {
		t.Fatalf("a new session under the orphan's id reads %q %v", got, err)
	}
}

func testReward(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	if v, err := s.RewardGet(ctx, store.RewardMarks, "c1"); err != nil || v != nil {
		t.Fatalf("RewardGet of nothing: %q %v", v, err)
	}
	err := s.RewardUpdate(ctx, func(tx store.RewardTx) error {
		if v, err := tx.Get(store.RewardMarks, "c1"); err != nil || v != nil {
			return fmt.Errorf("a get of nothing: %q %v", v, err)
		}
		for _, bk := range store.RewardBuckets {
			if err := tx.Put(bk, "c1", []byte(bk.String())); err != nil {
				return err
			}
		}
		if v, err := tx.Get(store.RewardMarks, "c1"); err != nil || string(v) != "reward_marks" {
			return fmt.Errorf("a get after a put in one transaction: %q %v", v, err)
		}
		return appendEntry("reward", "rwd_1")(tx.Ledger())
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, bk := range store.RewardBuckets {
		if v, err := s.RewardGet(ctx, bk, "c1"); err != nil || string(v) != bk.String() {
			t.Fatalf("RewardGet(%s): %q %v", bk, v, err)
		}
	}
	// A failing update stores nothing, its ledger entry included.
	refuse := errors.New("refused")
	err = s.RewardUpdate(ctx, func(tx store.RewardTx) error {
		if err := tx.Put(store.RewardMarks, "c1", []byte("changed")); err != nil {
			return err
		}
		return errors.Join(appendEntry("reward", "rwd_2")(tx.Ledger()), refuse)
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("a refusing update: %v", err)
	}
	if v, _ := s.RewardGet(ctx, store.RewardMarks, "c1"); string(v) != "reward_marks" {
		t.Fatalf("a refused update changed the mark: %q", v)
	}
	checkChain(t, s, 1)

	// Updates are serialized: concurrent read-modify-writes lose nothing.
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- s.RewardUpdate(ctx, func(tx store.RewardTx) error {
				v, err := tx.Get(store.RewardMarks, "counter")
				if err != nil {
					return err
				}
				return tx.Put(store.RewardMarks, "counter", append(v, 'x'))
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.RewardGet(ctx, store.RewardMarks, "counter"); err != nil || len(v) != n {
		t.Fatalf("after %d concurrent increments the counter is %d (%v)", n, len(v), err)
	}
}

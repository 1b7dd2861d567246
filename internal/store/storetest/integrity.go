package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

// keys are the test's key sets.
var (
	evidenceA = bytes.Repeat([]byte{0xA1}, 32)
	evidenceB = bytes.Repeat([]byte{0xB2}, 32)
)

func keysOf(evidence []byte, signing string) store.Keys {
	return store.Keys{EvidenceKeyID: store.EvidenceKeyID(evidence), SigningKeyID: signing}
}

func bind(t *testing.T, s store.Backend, evidence []byte, signing string, rotate bool) (store.BindReport, error) {
	t.Helper()
	return s.Bind(t.Context(), store.IntegrityKey(evidence), keysOf(evidence, signing), rotate)
}

// fill writes one value of every kind.
func fill(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := t.Context()
	create(t, s, "s1", `{"m":"one"}`, baseline(t, s, "s1", 0, `{"a":1}`), baseline(t, s, "s1", store.CensusCapture(0), `{"c":1}`))
	finish(t, s, "s1", `{"outcome":"FAILED"}`, true)
	if _, err := s.AddReverification(ctx, "s1", func(l store.Ledger, _ int) ([]byte, bool, error) {
		return []byte(`{"outcome":"FAILED","attempt":1}`), true, nil
	}); err != nil {
		t.Fatal(err)
	}
	create(t, s, "s2", `{"m":"two"}`)
	if err := s.RewardUpdate(ctx, func(tx store.RewardTx) error { return tx.Put(store.RewardMarks, "c1", []byte(`{"mark":3}`)) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateRun(ctx, "r1", []byte(`{"run":"one"}`), noEntry); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every value fill wrote.
func readAll(ctx context.Context, s store.Backend) error {
	for _, id := range []string{"s1", "s2"} {
		if _, _, err := s.Session(ctx, id); err != nil {
			return err
		}
	}
	if _, err := s.Reverifications(ctx, "s1"); err != nil {
		return err
	}
	for _, c := range []int{0, store.CensusCapture(0)} {
		if err := s.ReadBaseline(ctx, "s1", c, func([]byte) error { return nil }); err != nil {
			return err
		}
	}
	if err := s.ForEachSession(ctx, func(string, []byte, []byte) error { return nil }); err != nil {
		return err
	}
	if _, err := s.Run(ctx, "r1"); err != nil {
		return err
	}
	_, err := s.RewardGet(ctx, store.RewardMarks, "c1")
	return err
}

func testIntegrity(t *testing.T, b Backend) {
	for _, c := range []struct {
		v       Value
		session string // the session the error names ("" for a reward record)
		read    func(context.Context, store.Backend) error
	}{
		{Value{Kind: KindSession, Session: "s2"}, "s2", func(ctx context.Context, s store.Backend) error {
			_, _, err := s.Session(ctx, "s2")
			return err
		}},
		{Value{Kind: KindResult, Session: "s1"}, "s1", func(ctx context.Context, s store.Backend) error {
			_, _, err := s.Session(ctx, "s1")
			return err
		}},
		{Value{Kind: KindResult, Session: "s1"}, "s1", func(ctx context.Context, s store.Backend) error {
			// A damaged stored result is never served as "already verified".
			_, _, err := s.FinishSessionLedger(ctx, "s1", func(store.Ledger) ([]byte, bool, error) { return []byte(`{}`), false, nil })
			return err
		}},
		{Value{Kind: KindSession, Session: "s1"}, "s1", func(ctx context.Context, s store.Backend) error {
			// The walk passes the damaged session with no value, and goes
			// on to the others.
			var damaged error
			seen := 0
			err := s.ForEachSession(ctx, func(id string, meta, _ []byte) error {
				seen++
				if meta == nil && damaged == nil {
					damaged = &store.IntegrityError{Session: id, What: "record"}
				}
				return nil
			})
			if err == nil && seen < 2 {
				err = fmt.Errorf("the walk saw %d sessions; a damaged one must not stop it", seen)
			}
			return cmp.Or(err, damaged)
		}},
		{Value{Kind: KindReverification, Session: "s1", Attempt: 1}, "s1", func(ctx context.Context, s store.Backend) error {
			_, err := s.Reverifications(ctx, "s1")
			return err
		}},
		{Value{Kind: KindBaseline, Session: "s1", Capture: 0}, "s1", func(ctx context.Context, s store.Backend) error {
			return s.ReadBaseline(ctx, "s1", 0, func([]byte) error { return nil })
		}},
		{Value{Kind: KindBaseline, Session: "s1", Capture: store.CensusCapture(0)}, "s1", func(ctx context.Context, s store.Backend) error {
			return s.ReadBaseline(ctx, "s1", store.CensusCapture(0), func([]byte) error { return nil })
		}},
		{Value{Kind: KindReward, Bucket: store.RewardMarks, Key: "c1"}, "", func(ctx context.Context, s store.Backend) error {
			_, err := s.RewardGet(ctx, store.RewardMarks, "c1")
			return err
		}},
		{Value{Kind: KindReward, Bucket: store.RewardMarks, Key: "c1"}, "", func(ctx context.Context, s store.Backend) error {
			return s.RewardUpdate(ctx, func(tx store.RewardTx) error {
				_, err := tx.Get(store.RewardMarks, "c1")
				return err
			})
		}},
		{Value{Kind: KindRun, Key: "r1"}, "", func(ctx context.Context, s store.Backend) error {
			_, err := s.Run(ctx, "r1")
			return err
		}},
		{Value{Kind: KindRun, Key: "r1"}, "", func(ctx context.Context, s store.Backend) error {
			// A damaged run is never updated from.
			_, err := s.UpdateRun(ctx, "r1", func(store.Ledger, []byte) ([]byte, store.RunChange, error) {
				return []byte(`{}`), store.RunChange{}, nil
			})
			return err
		}},
		{Value{Kind: KindRun, Key: "r1"}, "", func(ctx context.Context, s store.Backend) error {
			return s.ForEachRun(ctx, func(string, []byte) error { return nil })
		}},
	} {
		t.Run(fmt.Sprintf("%s %s%s", c.v.Kind, c.v.Session, c.v.Key), func(t *testing.T) {
			s := b.Open(t)
			if rep, err := bind(t, s, evidenceA, "sk_a", false); err != nil || !rep.FirstWriter {
				t.Fatalf("Bind of an empty store: %+v %v", rep, err)
			}
			fill(t, s)
			if err := readAll(t.Context(), s); err != nil {
				t.Fatalf("reading sound values: %v", err)
			}
			b.Damage(t, s, c.v)
			err := c.read(t.Context(), s)
			ie, ok := errors.AsType[*store.IntegrityError](err)
			if !ok || ie.Session != c.session {
				t.Fatalf("reading a damaged value: %v; want an *IntegrityError naming session %q", err, c.session)
			}
		})
	}
}

func testKeys(t *testing.T, b Backend) {
	s := b.Open(t)
	// Values written before Bind are tagged by the first Bind and read back.
	fill(t, s)
	rep, err := bind(t, s, evidenceA, "sk_a", false)
	if err != nil || !rep.FirstWriter || rep.Sealed < 7 {
		t.Fatalf("the first Bind of a store with values: %+v %v; want first writer, every value sealed", rep, err)
	}
	if err := readAll(t.Context(), s); err != nil {
		t.Fatalf("reading values sealed by Bind: %v", err)
	}
	if rep, err := bind(t, s, evidenceA, "sk_a", false); err != nil || rep != (store.BindReport{}) {
		t.Fatalf("Bind again with the same keys: %+v %v; want nothing to do", rep, err)
	}
	_, err = bind(t, s, evidenceB, "sk_a", false)
	if me, ok := errors.AsType[*store.KeyMismatchError](err); !ok || me.Have != keysOf(evidenceA, "sk_a") {
		t.Fatalf("Bind with another evidence key: %v; want a *KeyMismatchError naming the recorded keys", err)
	}
	rep, err = bind(t, s, evidenceB, "sk_b", true)
	if err != nil || !rep.Rotated || rep.Resealed < 7 {
		t.Fatalf("Bind with rotate: %+v %v; want rotated and every value re-tagged", rep, err)
	}
	if err := readAll(t.Context(), s); err != nil {
		t.Fatalf("reading values re-tagged under the new key: %v", err)
	}
}

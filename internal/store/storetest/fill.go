package storetest

import (
	"bytes"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

// Two evidence keys for the key-binding tests of a backend.
var (
	EvidenceA = bytes.Repeat([]byte{0xA1}, 32)
	EvidenceB = bytes.Repeat([]byte{0xB2}, 32)
)

// KeysOf is the key ids a store binds for an evidence key and a signing
// key id.
func KeysOf(evidence []byte, signing string) store.Keys {
	return store.Keys{EvidenceKeyID: store.EvidenceKeyID(evidence), SigningKeyID: signing}
}

// Fill writes one of each kind of stored value: a finished session (s1)
// with a re-verification, a baseline and a census, an unfinished session
// (s2) and a reward record; 7 values, for a backend's own damage tests.
func Fill(t *testing.T, s store.Backend) {
	t.Helper()
	w := s.NewBaseline("s1", 0)
	census := s.NewBaseline("s1", store.CensusCapture(0))
	for _, b := range []store.BaselineWriter{w, census} {
		if err := b.Add(t.Context(), []byte(`{"id":1,"note":"Triage"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSessionLedger(t.Context(), "s1", []byte(`{"m":"one"}`), noEntry, w, census); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FinishSessionLedger(t.Context(), "s1", func(store.Ledger) ([]byte, bool, error) {
		return []byte(`{"outcome":"FAILED","type":"Triage"}`), true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddReverification(t.Context(), "s1", func(store.Ledger, int) ([]byte, bool, error) {
		return []byte(`{"outcome":"FAILED","attempt":1}`), true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSessionLedger(t.Context(), "s2", []byte(`{"m":"two"}`), noEntry); err != nil {
		t.Fatal(err)
	}
	if err := s.RewardUpdate(t.Context(), func(tx store.RewardTx) error { return tx.Put(store.RewardMarks, "c1", []byte(`{"mark":3}`)) }); err != nil {
		t.Fatal(err)
	}
}

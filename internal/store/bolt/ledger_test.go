package bolt

import (
	"bytes"
	"testing"

	"github.com/verifierd/verifierd/receipt"

	"github.com/verifierd/verifierd/internal/store"
)

func TestLedgerChainsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSessionLedger(t.Context(), "s1", []byte(`{}`), func(l store.Ledger) error {
		_, err := l.Append("begin", "s1", "sha256:aa")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var pos receipt.Position
	if _, _, err := s.FinishSessionLedger(t.Context(), "s1", func(l store.Ledger) ([]byte, bool, error) {
		pos = l.Next()
		_, err := l.Append("verify", "s1", "sha256:bb")
		return []byte(`{"r":1}`), true, err
	}); err != nil {
		t.Fatal(err)
	}
	// A second finish returns the stored result and appends nothing.
	got, _, err := s.FinishSessionLedger(t.Context(), "s1", func(store.Ledger) ([]byte, bool, error) {
		t.Fatal("build called for a finished session")
		return nil, false, nil
	})
	if err != nil || string(got) != `{"r":1}` {
		t.Fatalf("second finish: %s %v", got, err)
	}
	if pos.Seq != 2 {
		t.Fatalf("verify at seq %d, want 2", pos.Seq)
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddReverification(t.Context(), "s1", func(l store.Ledger, attempt int) ([]byte, bool, error) {
		if attempt != 1 {
			t.Errorf("attempt %d", attempt)
		}
		_, err := l.Append("reverify", "s1", "sha256:cc")
		return []byte(`{"r":2}`), true, err
	}); err != nil {
		t.Fatal(err)
	}
	var entries []receipt.Entry
	var raw bytes.Buffer
	if err := s.ExportLedger(t.Context(), 0, func(e receipt.Entry, canonical []byte) error {
		entries = append(entries, e)
		raw.Write(canonical)
		raw.WriteByte('\n')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[2].Type != "reverify" {
		t.Fatalf("entries %+v", entries)
	}
	back, err := receipt.ReadEntries(&raw)
	if err != nil {
		t.Fatal(err)
	}
	head, err := receipt.VerifyChain(back, false)
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := s.LedgerHead(t.Context()); next.Head != head || next.Seq != 4 {
		t.Fatalf("head %+v, chain head %s", next, head)
	}
	rs, err := s.Reverifications(t.Context(), "s1")
	if err != nil || len(rs) != 1 || string(rs[0]) != `{"r":2}` {
		t.Fatalf("reverifications %q %v", rs, err)
	}
}

func TestSalvageCopiesTheLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSessionLedger(t.Context(), "s1", []byte(`{}`), func(l store.Ledger) error {
		_, err := l.Append("begin", "s1", "sha256:aa")
		return err
	}, s.NewBaseline("s1", 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FinishSessionLedger(t.Context(), "s1", func(l store.Ledger) ([]byte, bool, error) {
		_, err := l.Append("verify", "s1", "sha256:bb")
		return []byte(`{"outcome":"RECONCILIATION_REQUIRED"}`), true, err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := t.TempDir()
	rep, err := Salvage(dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LedgerEntries != 2 || rep.LedgerIncomplete || rep.Baselines != 1 {
		t.Fatalf("salvage %+v", rep)
	}
	s, err = Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []receipt.Entry
	if err := s.ExportLedger(t.Context(), 0, func(e receipt.Entry, _ []byte) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.VerifyChain(got, false); err != nil || len(got) != 2 {
		t.Fatalf("salvaged ledger %+v: %v", got, err)
	}
}

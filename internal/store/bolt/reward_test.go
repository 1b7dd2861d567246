package bolt

import (
	"path/filepath"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

// A salvaged store keeps the reward buckets: the policy-update marks must
// not reset because the store was repaired.
func TestSalvageKeepsRewardBuckets(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.RewardUpdate(t.Context(), func(tx store.RewardTx) error {
		if err := tx.Put(store.RewardMarks, "sha256:c", []byte(`{"highest_policy_update":7}`)); err != nil {
			return err
		}
		return tx.Put(store.RewardReceipts, "rwd_1", []byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := filepath.Join(t.TempDir(), "salvaged")
	if _, err := Salvage(dir, out); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v, err := s2.RewardGet(t.Context(), store.RewardMarks, "sha256:c"); err != nil || string(v) != `{"highest_policy_update":7}` {
		t.Fatalf("salvaged mark %q, %v", v, err)
	}
	if v, _ := s2.RewardGet(t.Context(), store.RewardReceipts, "rwd_1"); string(v) != `{}` {
		t.Fatalf("salvaged receipt %q", v)
	}
}

package pg

import (
	"context"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/reward/rewardtest"
	"github.com/verifierd/verifierd/internal/store"
)

// Reward episodes in PostgreSQL: a registration stores the oracle
// candidate that read its baseline and scoring goes through it; an
// episode stored before oracles were pinned still reads, and scores
// unscored (ORACLE_NOT_PINNED), never certified.
func TestRewardEpisodesPinTheirOracle(t *testing.T) {
	t.Parallel()
	r := rewardtest.New(t)
	pg := open(t, newDatabase(t))
	r.Service.Store = pg
	ctx := context.Background()
	if _, err := r.Service.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
		t.Fatal(err)
	}
	raw, err := pg.RewardGet(ctx, store.RewardEpisodes, "mockmed/episode-0001")
	if err != nil || !strings.Contains(string(raw), `"oracle":{"index":0,"kind":"mem","tier":1,"config_digest":"sha256:mem"}`) {
		t.Fatalf("stored episode: %s %v", raw, err)
	}
	r.Oracle.Add("patient-0001", "Triage")
	res, err := r.Service.ScoreEpisode(ctx, "", []byte(r.Descriptor("episode-0001", "ckpt-0001", 0, "")))
	if err != nil || res.Receipt.RewardOutcome != reward.OutcomeVerified || !res.Receipt.Certified {
		t.Fatalf("pinned episode: %+v %v", res, err)
	}

	old := `{"contract":"mockmed","episode_id":"episode-0002","identity":{"patient_id":"patient-0002"},"baseline_reachable":true,"baseline_records":[],"registered_at":"2026-01-01T00:00:00Z"}`
	if err := pg.RewardUpdate(ctx, func(tx store.RewardTx) error {
		return tx.Put(store.RewardEpisodes, "mockmed/episode-0002", []byte(old))
	}); err != nil {
		t.Fatal(err)
	}
	r.Oracle.Add("patient-0002", "Triage")
	res, err = r.Service.ScoreEpisode(ctx, "", []byte(r.Descriptor("episode-0002", "ckpt-0001", 0, "")))
	if err != nil {
		t.Fatal(err)
	}
	if rc := res.Receipt; rc.RewardOutcome != reward.OutcomeFailedPlatform || rc.ReasonCode != reward.ReasonOracleNotPinned || rc.ScalarReward != nil || rc.Certified {
		t.Fatalf("an episode stored before pinning: %+v", rc)
	}
}

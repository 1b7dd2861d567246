package reward

import (
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// FuzzParseDescriptor: a trainer's descriptor is client input. Whatever the
// bytes, the parser answers a checked descriptor or an invalid_episode
// refusal that echoes no forbidden key, and never panics.
func FuzzParseDescriptor(f *testing.F) {
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, s := range []string{
		`{"episode_id": "episode-0001", "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": "` + digest + `"}`,
		`{"episode_id": "episode-0001", "policy_checkpoint_id": "ckpt-0001", "policy_update": 1e3, "reward_contract_digest": "` + digest + `", "metadata": {"a": [{"screenshot": 1}]}}`,
		`{"episode_id": "e", "oracle_identity": {"": ""}, "runtime_signal": "refused"}`,
		`[]`, `{"a":1,"a":2}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDescriptor(data)
		if err != nil {
			if rf, ok := refusal.As(err); !ok || rf.Code != CodeInvalidEpisode {
				t.Fatalf("refusal %v, want invalid_episode", err)
			}
			return
		}
		if !opaqueID.MatchString(d.EpisodeID) || !opaqueID.MatchString(d.PolicyCheckpointID) || d.PolicyUpdate < 0 || !digestRE.MatchString(d.RewardContractDigest) || !signals[d.Signal] {
			t.Fatalf("accepted an invalid descriptor: %+v", d)
		}
	})
}

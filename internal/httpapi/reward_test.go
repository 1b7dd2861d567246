package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/reward/rewardtest"
)

const token = "s3cret-token-for-tests"

type client struct {
	t      *testing.T
	url    string
	bodies *[]string // every response body, for the value search
}

func (c client) do(method, path, body, tok string) (int, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	*c.bodies = append(*c.bodies, string(raw))
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s %s: %d, body is not JSON: %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

func serve(t *testing.T, rig *rewardtest.Rig, bodies *[]string) client {
	api := New(token)
	RegisterReward(api, rig.Service)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return client{t: t, url: srv.URL, bodies: bodies}
}

func register(episode, patient string) string {
	return fmt.Sprintf(`{"episode_id": %q, "oracle_identity": {"patient_id": %q}}`, episode, patient)
}

func TestRewardRoutesRefusals(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	var bodies []string
	c := serve(t, rig, &bodies)
	steps := []struct {
		name, method, path, body, token string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/episodes", register("episode-0001", "patient-0001"), "", 401, "unauthorized"},
		{"wrong token", "POST", "/v1/episodes", register("episode-0001", "patient-0001"), "wrong", 401, "unauthorized"},
		{"not JSON", "POST", "/v1/rewards", "nope", token, 400, "bad_request"},
		{"register", "POST", "/v1/episodes", register("episode-0001", "patient-0001"), token, 200, ""},
		{"register: identity keys differ", "POST", "/v1/episodes", `{"episode_id": "episode-0002", "oracle_identity": {"patient_id": "p", "visit": "v"}}`, token, 422, "identity_mismatch"},
		{"register: no identity", "POST", "/v1/episodes", `{"episode_id": "episode-0002"}`, token, 422, "identity_missing"},
		{"register: bad episode id", "POST", "/v1/episodes", register("../../etc", "patient-0001"), token, 422, "invalid_episode"},
		{"register: unknown key", "POST", "/v1/episodes", `{"episode_id": "episode-0003", "oracle_identty": {"patient_id": "p"}}`, token, 422, "invalid_episode"},
		{"register: episode_id not a string", "POST", "/v1/episodes", `{"episode_id": 3, "oracle_identity": {"patient_id": "p"}}`, token, 422, "invalid_episode"},
		{"register: contract null", "POST", "/v1/episodes", `{"episode_id": "episode-0003", "contract": null, "oracle_identity": {"patient_id": "p"}}`, token, 422, "invalid_episode"},
		{"register: another subject", "POST", "/v1/episodes", register("episode-0001", "patient-0002"), token, 409, "identity_conflict"},
		{"register: same subject again", "POST", "/v1/episodes", register("episode-0001", "patient-0001"), token, 200, ""},
		{"score: extra key", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "extra": 1`), token, 422, "invalid_episode"},
		{"score: forbidden metadata key", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "metadata": {"trajectory": []}`), token, 422, "invalid_episode"},
		{"score: unknown signal", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "runtime_signal": "done"`), token, 422, "invalid_episode"},
		{"score: another contract", "POST", "/v1/rewards", strings.Replace(rig.Descriptor("episode-0001", "ckpt-0001", 0, ""), rig.Digest, "sha256:"+strings.Repeat("b", 64), 1), token, 422, "contract_mismatch"},
		{"score: another subject", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "oracle_identity": {"patient_id": "patient-0002"}`), token, 422, "identity_conflict"},
		{"score: unregistered, no identity", "POST", "/v1/rewards", rig.Descriptor("episode-0009", "ckpt-0001", 0, ""), token, 422, "identity_missing"},
		{"score: unregistered, wrong keys", "POST", "/v1/rewards", rig.Descriptor("episode-0009", "ckpt-0001", 0, `, "metadata": {"oracle_identity": {"visit": "v"}}`), token, 422, "identity_mismatch"},
		{"score", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 7, ""), token, 200, ""},
		{"score again", "POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 7, ""), token, 409, "duplicate_episode"},
		{"register a scored episode", "POST", "/v1/episodes", register("episode-0001", "patient-0001"), token, 409, "duplicate_episode"},
		{"regressed update", "POST", "/v1/rewards", rig.Descriptor("episode-0010", "ckpt-0001", 6, `, "oracle_identity": {"patient_id": "patient-0010"}`), token, 422, "policy_update_regressed"},
		{"unknown receipt", "GET", "/v1/rewards/rwd_" + strings.Repeat("0", 32), "", token, 404, "not_found"},
		{"grader without item", "POST", "/v1/graders/openai", `{"sample": {}}`, token, 400, "bad_request"},
		{"unknown route", "GET", "/v1/nothing", "", token, 404, "not_found"},
		{"wrong method", "GET", "/v1/episodes", "", token, 405, "method_not_allowed"},
	}
	for _, s := range steps {
		status, body := c.do(s.method, s.path, s.body, s.token)
		if status != s.status || (s.code != "" && body["error"] != s.code) {
			t.Errorf("%s: %d %v, want %d %s", s.name, status, body, s.status, s.code)
		}
		if s.code != "" && body["detail"] == nil {
			t.Errorf("%s: no detail in %v", s.name, body)
		}
	}
	assertNoValues(t, bodies)
}

// TestRegisterBodyRefusals: the registration body is read by the strict
// decoder, whose refusal names the key, what is allowed and the key
// probably meant.
func TestRegisterBodyRefusals(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	var bodies []string
	c := serve(t, rig, &bodies)
	for _, tc := range []struct{ body, want string }{
		{`{"episode_id": "episode-0003", "oracle_identty": {"patient_id": "p"}}`, `"oracle_identty"`},
		{`{"episode_id": "episode-0003", "oracle_identty": {"patient_id": "p"}}`, "oracle_identity"},
		{`{"episode_id": 3, "oracle_identity": {"patient_id": "p"}}`, "episode_id"},
	} {
		status, body := c.do("POST", "/v1/episodes", tc.body, token)
		detail, _ := body["detail"].(string)
		if status != 422 || body["error"] != "invalid_episode" || !strings.Contains(detail, tc.want) {
			t.Errorf("%s: %d %v, want 422 invalid_episode naming %s", tc.body, status, body, tc.want)
		}
	}
}

func TestRewardRoutesOutcomesAndGrader(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	var bodies []string
	c := serve(t, rig, &bodies)
	// Honest: one Triage row lands.
	c.do("POST", "/v1/episodes", register("episode-0001", "patient-0001"), token)
	rig.Oracle.Add("patient-0001", "Triage")
	status, body := c.do("POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, ""), token)
	rc, _ := body["receipt"].(map[string]any)
	if status != 200 || rc["reward_outcome"] != "verified" || rc["scalar_reward"] != 1.0 || rc["certified"] != true || body["unscored"] != false {
		t.Fatalf("honest: %d %v", status, body)
	}
	id, _ := rc["receipt_id"].(string)
	if status, got := c.do("GET", "/v1/rewards/"+id, "", token); status != 200 || got["receipt"].(map[string]any)["receipt_id"] != id {
		t.Errorf("GET the reward: %d %v", status, got)
	}
	// The grader: a banner lie grades 0, an unreachable store is 422
	// unscored (never 0), and its retry is a duplicate.
	c.do("POST", "/v1/episodes", register("episode-0002", "patient-0002"), token)
	status, body = c.do("POST", "/v1/graders/openai", `{"sample": {}, "item": `+rig.Descriptor("episode-0002", "ckpt-0001", 0, "")+`}`, token)
	if status != 200 || body["score"] != 0.0 || body["reward_outcome"] != "wrong_effect" {
		t.Errorf("grader banner lie: %d %v", status, body)
	}
	c.do("POST", "/v1/episodes", register("episode-0003", "patient-0003"), token)
	rig.Oracle.Add("patient-0003", "Triage")
	status, body = c.do("POST", "/v1/graders/openai", `{"sample": {}, "item": `+rig.Descriptor("episode-0003", "ckpt-0001", 0, "")+`}`, token)
	if status != 200 || body["score"] != 1.0 {
		t.Errorf("grader honest: %d %v", status, body)
	}
	c.do("POST", "/v1/episodes", register("episode-0004", "patient-0004"), token)
	rig.Oracle.Unreachable = true
	item := `{"sample": {}, "item": ` + rig.Descriptor("episode-0004", "ckpt-0001", 0, "") + `}`
	status, body = c.do("POST", "/v1/graders/openai", item, token)
	if status != 422 || body["error"] != "unscored" || body["reward_outcome"] != "failed_platform" || body["score"] != nil || body["receipt_id"] == nil {
		t.Errorf("grader unscored: %d %v", status, body)
	}
	if status, body = c.do("POST", "/v1/graders/openai", item, token); status != 409 || body["error"] != "duplicate_episode" {
		t.Errorf("grader retry: %d %v", status, body)
	}
	assertNoValues(t, bodies)
}

func TestRewardRoutesPolicyUpdateMark(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	var bodies []string
	c := serve(t, rig, &bodies)
	n := 0
	score := func(c client, checkpoint string, update int64) (int, map[string]any) {
		n++
		ep, p := fmt.Sprintf("episode-%04d", n), fmt.Sprintf("patient-%04d", n)
		c.do("POST", "/v1/episodes", register(ep, p), token)
		rig.Oracle.Add(p, "Triage")
		return c.do("POST", "/v1/rewards", rig.Descriptor(ep, checkpoint, update, ""), token)
	}
	for _, s := range []struct {
		update    int64
		state     string
		certified bool
	}{{0, "current", true}, {999, "current", true}, {1_000_000_000, "expired", false}} {
		status, body := score(c, "ckpt-0001", s.update)
		rc, _ := body["receipt"].(map[string]any)
		if status != 200 || rc["certificate_state"] != s.state || rc["certified"] != s.certified || rc["reward_outcome"] != "verified" {
			t.Errorf("update %d: %d %v", s.update, status, body)
		}
	}
	if status, body := score(c, "ckpt-0001", 0); status != 422 || body["error"] != "policy_update_regressed" {
		t.Errorf("update 0 after 10^9: %d %v", status, body)
	}
	// A restart (the store reopened, a new listener) and a renamed checkpoint.
	rig.Reopen(t, nil)
	c = serve(t, rig, &bodies)
	if status, body := score(c, "another-checkpoint", 0); status != 422 || body["error"] != "policy_update_regressed" || !strings.Contains(fmt.Sprint(body["detail"]), "ckpt-0001") {
		t.Errorf("after restart and rename: %d %v", status, body)
	}
	assertNoValues(t, bodies)
}

// assertNoValues: no body carries the subject's identity, a record value
// or a forbidden metadata key.
func assertNoValues(t *testing.T, bodies []string) {
	t.Helper()
	all := strings.Join(bodies, "\n")
	for _, s := range []string{"patient-0", "Triage", "Discharge", "saved", "trajectory", "screenshot", `"records"`, `"note"`} {
		if strings.Contains(all, s) {
			t.Errorf("a response body contains %q", s)
		}
	}
}

// TestRewardIdentityScalars: an episode's oracle_identity may hold JSON
// numbers and booleans, read as their text (the number as written), at
// registration and in the descriptor alike, so 1234 and "1234" name the
// same subject; null, objects and arrays are refused.
func TestRewardIdentityScalars(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	var bodies []string
	c := serve(t, rig, &bodies)
	if status, body := c.do("POST", "/v1/episodes", `{"episode_id": "episode-0001", "oracle_identity": {"patient_id": 1234}}`, token); status != 200 {
		t.Fatalf("register with a number: %d %v", status, body)
	}
	// The same subject written as a string is not another subject.
	if status, body := c.do("POST", "/v1/episodes", `{"episode_id": "episode-0001", "oracle_identity": {"patient_id": "1234"}}`, token); status != 200 {
		t.Errorf("register again with its text: %d %v, want 200", status, body)
	}
	if status, body := c.do("POST", "/v1/episodes", `{"episode_id": "episode-0001", "oracle_identity": {"patient_id": 1234.0}}`, token); status != 409 || body["error"] != "identity_conflict" {
		t.Errorf("register again with 1234.0 (another text): %d %v, want 409 identity_conflict", status, body)
	}
	rig.Oracle.Add("1234", "Triage")
	status, body := c.do("POST", "/v1/rewards", rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "oracle_identity": {"patient_id": 1234}`), token)
	rc, _ := body["receipt"].(map[string]any)
	if status != 200 || rc["reward_outcome"] != "verified" {
		t.Errorf("score with a numeric identity: %d %v", status, body)
	}
	for _, v := range []string{"null", `{"x": "y"}`, `["1234"]`} {
		status, body := c.do("POST", "/v1/episodes", `{"episode_id": "episode-0002", "oracle_identity": {"patient_id": `+v+`}}`, token)
		if status != 422 || body["error"] != "invalid_episode" {
			t.Errorf("identity %s: %d %v, want 422 invalid_episode", v, status, body)
		}
	}
}

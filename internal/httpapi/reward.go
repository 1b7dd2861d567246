package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"

	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// RegisterReward joins the reward routes a trainer speaks:
//
//	POST /v1/episodes          register an episode before its rollout
//	POST /v1/rewards           score an episode (the descriptor)
//	GET  /v1/rewards/{id}      an issued reward
//	POST /v1/graders/openai    {sample, item}: a grade in [0, 1], or 422 unscored
//	GET  /v1/reward-contracts  the registered contracts and their digests
func RegisterReward(a *API, svc *reward.Service) {
	h := rewardHandler{svc: svc}
	a.Handle("POST /v1/episodes", h.register)
	a.Handle("POST /v1/rewards", h.score)
	a.Handle("GET /v1/rewards/{id}", h.get)
	a.Handle("POST /v1/graders/openai", h.grade)
	a.Handle("GET /v1/reward-contracts", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"contracts": svc.List()})
	})
}

type rewardHandler struct{ svc *reward.Service }

// readObject reads a JSON object body (duplicate keys refused); 400 when
// the body is not one.
func readObject(w http.ResponseWriter, r *http.Request) ([]byte, map[string]any, bool) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "bad_request", "the body could not be read (at most 1 MiB): "+err.Error())
		return nil, nil, false
	}
	tree, err := judge.DecodeJSON(raw)
	if ne, deep := errors.AsType[*jsondepth.Error](err); deep {
		WriteError(w, http.StatusBadRequest, "bad_request", ne.Error()) // bounded: 64 levels of clipped names
		return nil, nil, false
	}
	m, ok := tree.(map[string]any)
	if err != nil || !ok {
		WriteError(w, http.StatusBadRequest, "bad_request", "the body must be one JSON object")
		return nil, nil, false
	}
	return raw, m, true
}

// RewardStatus is the HTTP status a reward refusal of code answers with
// (docs/rewards.md), the one mapping of the reward package's codes onto
// the HTTP API: 404 for not_found; 409 for duplicate_episode, and for
// identity_conflict when registering (the episode already exists for
// another subject); 422 for every other code, identity_conflict at scoring
// among them (the descriptor names another subject than the registered
// one). internal/server maps the same codes onto gRPC codes.
func RewardStatus(code string, registering bool) int {
	switch {
	case code == reward.CodeNotFound:
		return http.StatusNotFound
	case code == reward.CodeDuplicateEpisode, code == reward.CodeIdentityConflict && registering:
		return http.StatusConflict
	}
	return http.StatusUnprocessableEntity
}

// fail answers a refusal with its code's status (RewardStatus), any other
// error with 500; registering is true for POST /v1/episodes.
func (h rewardHandler) fail(w http.ResponseWriter, err error, registering bool) {
	if rf, ok := refusal.As(err); ok {
		WriteError(w, RewardStatus(rf.Code, registering), rf.Code, rf.Message)
		return
	}
	WriteError(w, http.StatusInternalServerError, "internal", "the daemon log has the details")
}

func (h rewardHandler) register(w http.ResponseWriter, r *http.Request) {
	_, m, ok := readObject(w, r)
	if !ok {
		return
	}
	var req episodeRequest
	if err := strict.Decode(m, "", &req); err != nil {
		WriteError(w, http.StatusUnprocessableEntity, reward.CodeInvalidEpisode, err.Error())
		return
	}
	var identity map[string]string
	if req.OracleIdentity != nil {
		id, err := reward.ParseIdentity(req.OracleIdentity)
		if err != nil {
			h.fail(w, err, true)
			return
		}
		identity = id
	}
	res, err := h.svc.RegisterEpisode(r.Context(), req.Contract, req.RewardContractDigest, req.EpisodeID, identity)
	if err != nil {
		h.fail(w, err, true)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

// episodeRequest is the body of POST /v1/episodes, read by the strict
// decoder: any other key, or a value of another type, is invalid_episode
// (422) with the path and what is allowed there.
type episodeRequest struct {
	EpisodeID            string `json:"episode_id"`
	OracleIdentity       any    `json:"oracle_identity"` // reward.ParseIdentity reads it
	Contract             string `json:"contract"`
	RewardContractDigest string `json:"reward_contract_digest"`
}

// rewardBody is a scored episode on the wire: the receipt (the signed
// payload, decoded) and the DSSE envelope that signs it.
type rewardBody struct {
	Issuer         string `json:"issuer"`
	IssuerKeyID    string `json:"issuer_key_id"`
	ExecuteSeal    bool   `json:"execute_seal"`
	ProductionSeal bool   `json:"production_seal"`
	Unscored       bool   `json:"unscored"`
	Receipt        any    `json:"receipt"`
	Envelope       any    `json:"envelope"`
}

func body(res *reward.Result) rewardBody {
	return rewardBody{Issuer: "self_signed", IssuerKeyID: res.Receipt.IssuerKeyID, Unscored: res.Receipt.Unscored, Receipt: res.Receipt, Envelope: res.Envelope}
}

func (h rewardHandler) score(w http.ResponseWriter, r *http.Request) {
	raw, _, ok := readObject(w, r)
	if !ok {
		return
	}
	res, err := h.svc.ScoreEpisode(r.Context(), r.URL.Query().Get("contract"), raw)
	if err != nil {
		h.fail(w, err, false)
		return
	}
	w.Header().Set("X-Verifierd-Issuer-Key-Id", res.Receipt.IssuerKeyID)
	WriteJSON(w, http.StatusOK, body(res))
}

func (h rewardHandler) get(w http.ResponseWriter, r *http.Request) {
	res, err := h.svc.GetReward(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, err, false)
		return
	}
	WriteJSON(w, http.StatusOK, body(res))
}

// grade answers an OpenAI-style grader call. An unscored episode is never
// graded 0: it is a 422 with error "unscored", and its receipt is kept, so
// a retry is a duplicate_episode.
func (h rewardHandler) grade(w http.ResponseWriter, r *http.Request) {
	_, m, ok := readObject(w, r)
	if !ok {
		return
	}
	_, hasSample := m["sample"].(map[string]any)
	item, hasItem := m["item"].(map[string]any)
	if !hasSample || !hasItem {
		WriteError(w, http.StatusBadRequest, "bad_request", "send {sample: {...}, item: {...}}; the episode descriptor is the item")
		return
	}
	raw, _ := json.Marshal(item)
	res, err := h.svc.ScoreEpisode(r.Context(), r.URL.Query().Get("contract"), raw)
	if err != nil {
		h.fail(w, err, false)
		return
	}
	rc := res.Receipt
	if rc.Unscored || rc.ScalarReward == nil {
		WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"error": reward.CodeUnscored, "detail": "the episode's effect is unknown (" + rc.RewardOutcome + "), so it has no grade; it is never graded 0",
			"reward_outcome": rc.RewardOutcome, "uncertainty": rc.Uncertainty, "receipt_id": rc.ReceiptID,
		})
		return
	}
	verified := 1.0
	if c, ok := h.svc.Contracts[rc.Contract]; ok {
		verified = c.Scoring.VerifiedReward
	}
	score := math.Min(1, math.Max(0, *rc.ScalarReward/verified))
	WriteJSON(w, http.StatusOK, map[string]any{
		"score": score, "scalar_reward": *rc.ScalarReward, "reward_outcome": rc.RewardOutcome,
		"certified": rc.Certified, "development_only": rc.DevelopmentOnly, "receipt_id": rc.ReceiptID,
	})
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

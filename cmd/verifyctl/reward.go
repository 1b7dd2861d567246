package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// rewardCommand is clientCommand for RewardService.
func rewardCommand(name string, args []string, stdout, stderr io.Writer,
	flags func(fs *flag.FlagSet) (check func() error),
	call func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error)) int {
	return serviceCommand(name, args, stdout, stderr, verifierv1.NewRewardServiceClient, flags, call)
}

func rewardResultJSON(r *verifierv1.RewardResult) map[string]any {
	out := map[string]any{
		"receipt_id": r.GetReceiptId(), "reward_outcome": r.GetRewardOutcome(), "scalar_reward": nil,
		"unscored": r.GetUnscored(), "certified": r.GetCertified(), "development_only": r.GetDevelopmentOnly(),
		"certificate_state": r.GetCertificateState(), "oracle_tier": r.GetOracleTier(), "uncertainty": r.GetUncertainty(),
		"receipt": json.RawMessage(r.GetReceiptJson()), "envelope": json.RawMessage(r.GetEnvelopeJson()),
	}
	if r.ScalarReward != nil {
		out["scalar_reward"] = r.GetScalarReward()
	}
	return out
}

// cmdEpisode: verifyctl episode register|score.
func cmdEpisode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "episode: register or score")
	}
	var contract string
	switch args[0] {
	case "register":
		var episode string
		identity := params{}
		return rewardCommand("episode register", args[1:], stdout, stderr, func(fs *flag.FlagSet) func() error {
			fs.StringVar(&contract, "contract", "", "reward contract name in the daemon config (optional when it serves one)")
			fs.StringVar(&episode, "episode", "", "episode id (8–128 characters: letters, digits, ._:-)")
			fs.Var(identity, "identity", "the subject: identity key=value (repeatable)")
			return func() error {
				if episode == "" {
					return fmt.Errorf("needs --episode ID")
				}
				return nil
			}
		}, func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error) {
			res, err := c.RegisterEpisode(ctx, &verifierv1.RegisterEpisodeRequest{Contract: contract, EpisodeId: episode, OracleIdentity: identity})
			if err != nil {
				return nil, err
			}
			return map[string]any{"contract": res.GetContract(), "episode_id": res.GetEpisodeId(), "baseline_reachable": res.GetBaselineReachable(), "baseline_record_count": res.GetBaselineRecordCount()}, nil
		})
	case "score":
		var file string
		var descriptor []byte
		return rewardCommand("episode score", args[1:], stdout, stderr, func(fs *flag.FlagSet) func() error {
			fs.StringVar(&contract, "contract", "", "reward contract name (optional: the descriptor's digest selects it)")
			fs.StringVar(&file, "descriptor", "", "the episode descriptor (JSON file, or - for stdin)")
			return func() (err error) {
				switch file {
				case "":
					return fmt.Errorf("needs --descriptor FILE|-")
				case "-":
					descriptor, err = io.ReadAll(stdin)
				default:
					descriptor, err = os.ReadFile(file)
				}
				return err
			}
		}, func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error) {
			res, err := c.ScoreEpisode(ctx, &verifierv1.ScoreEpisodeRequest{Contract: contract, DescriptorJson: descriptor})
			if err != nil {
				return nil, err
			}
			return rewardResultJSON(res.GetResult()), nil
		})
	}
	return usageError(stderr, "episode: unknown subcommand %q (register or score)", args[0])
}

// cmdReward: verifyctl reward calibrate|get.
func cmdReward(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "reward: contracts, calibrate or get")
	}
	switch args[0] {
	case "contracts":
		return rewardCommand("reward contracts", args[1:], stdout, stderr, func(*flag.FlagSet) func() error {
			return func() error { return nil }
		}, func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error) {
			res, err := c.ListRewardContracts(ctx, &verifierv1.ListRewardContractsRequest{})
			if err != nil {
				return nil, err
			}
			out := []map[string]any{}
			for _, rc := range res.GetContracts() {
				out = append(out, map[string]any{
					"name": rc.GetName(), "id": rc.GetId(), "version": rc.GetVersion(), "reward_contract_digest": rc.GetDigest(),
					"calibration_corpus_digest": rc.GetCorpusDigest(), "deployment": rc.GetDeployment(), "identity_keys": rc.GetIdentityKeys(),
					"certificate_id": rc.GetCertificateId(), "certificate_epsilon": rc.GetCertificateEpsilon(),
				})
			}
			return out, nil
		})
	case "get":
		var id string
		return rewardCommand("reward get", args[1:], stdout, stderr, func(fs *flag.FlagSet) func() error {
			fs.StringVar(&id, "receipt-id", "", "the reward receipt id")
			return func() error {
				if id == "" {
					return fmt.Errorf("needs --receipt-id ID")
				}
				return nil
			}
		}, func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error) {
			res, err := c.GetReward(ctx, &verifierv1.GetRewardRequest{ReceiptId: id})
			if err != nil {
				return nil, err
			}
			return rewardResultJSON(res.GetResult()), nil
		})
	case "calibrate":
		var contract, out string
		var trials int
		var delta float64
		var seed string
		return rewardCommand("reward calibrate", args[1:], stdout, stderr, func(fs *flag.FlagSet) func() error {
			fs.StringVar(&contract, "contract", "", "reward contract name in the daemon config")
			fs.IntVar(&trials, "trials", 300, "faulted trials")
			fs.Float64Var(&delta, "delta", 0.05, "1 − confidence of the bound")
			fs.StringVar(&seed, "seed", "", "trial seed (default 20260901)")
			fs.StringVar(&out, "out", "", "folder to write calibration.json and certificate.json to")
			return func() error {
				if contract == "" || out == "" {
					return fmt.Errorf("needs --contract NAME and --out DIR")
				}
				if seed != "" {
					if _, err := strconv.ParseUint(seed, 10, 64); err != nil {
						return fmt.Errorf("--seed: a whole number ≥ 0")
					}
				}
				return nil
			}
		}, func(ctx context.Context, c verifierv1.RewardServiceClient) (any, error) {
			req := &verifierv1.CalibrateRewardRequest{Contract: contract, Trials: int32(trials), Delta: delta}
			if seed != "" {
				v, _ := strconv.ParseUint(seed, 10, 64)
				req.Seed = &v
			}
			res, err := c.CalibrateReward(ctx, req)
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return nil, err
			}
			calPath, certPath := filepath.Join(out, "calibration.json"), filepath.Join(out, "certificate.json")
			if err := os.WriteFile(calPath, append(res.GetCalibrationJson(), '\n'), 0o644); err != nil {
				return nil, err
			}
			if err := os.WriteFile(certPath, append(res.GetCertificateJson(), '\n'), 0o644); err != nil {
				return nil, err
			}
			return map[string]any{
				"epsilon": strconv.FormatFloat(res.GetEpsilon(), 'f', 7, 64), "trials": res.GetTrials(), "false_accepts": res.GetFalseAccepts(),
				"delta": delta, "method": "clopper_pearson_one_sided_exact", "corpus_digest": res.GetCorpusDigest(),
				"fault_classes": res.GetFaultClasses(), "calibration": calPath, "certificate": certPath,
			}, nil
		})
	}
	return usageError(stderr, "reward: unknown subcommand %q (contracts, calibrate or get)", args[0])
}

package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// sqliteHeader opens every SQLite 3 database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// CheckDeployment checks a reward contract's oracle at load: the
// deployment is registered and parses, and a SQLite file it names is a
// SQLite database (a renamed JSON dump is refused, not read).
func (o RewardOracle) CheckDeployment(name string) error {
	data, err := registeredDeployment(o.daemon, name)
	if err != nil {
		return err
	}
	dep, _, err := parseDeployment(data)
	if err != nil {
		return err
	}
	return checkSQLiteFiles(dep)
}

func checkSQLiteFiles(dep *config.Deployment) error {
	for i, c := range dep.Candidates {
		if c.Kind != "sql" {
			continue
		}
		path, _ := c.Section["sqlite_database"].(string)
		if path == "" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("deployment.effects candidate %d: %w", i, err)
		}
		head := make([]byte, len(sqliteHeader))
		_, err = io.ReadFull(f, head)
		f.Close()
		if err != nil || !bytes.Equal(head, sqliteHeader) {
			return fmt.Errorf("deployment.effects candidate %d: %s is not a SQLite database file (it does not start with \"SQLite format 3\\0\"), so the sql adapter cannot read it as one", i, path)
		}
	}
	return nil
}

// RewardOracle reads registered deployments for the reward service
// (reward.Oracle) and loads the reward contracts whose oracles they are.
type RewardOracle struct {
	daemon     *config.Daemon  // registered deployments and reward contracts; may be nil
	signer     *signing.Signer // the daemon's key, trusted for certificates; may be nil
	configurer *configurer
	lookupEnv  func(string) (string, bool)
	reader     afterReader
}

// NewRewardOracle is the reward oracle over m's deployments, adapters and
// keys.
func NewRewardOracle(m *Manager) RewardOracle {
	return newRewardOracle(m.daemon, m.signer, m.configurer(), m.lookupEnv, m.afterReader())
}

// newRewardOracle reads the deployments registered in daemon through c,
// masks the secrets lookupEnv resolves, takes after reads with reader and
// trusts certificates signed by signer (both daemon and signer may be nil).
func newRewardOracle(daemon *config.Daemon, signer *signing.Signer, c *configurer, lookupEnv func(string) (string, bool), reader afterReader) RewardOracle {
	return RewardOracle{daemon: daemon, signer: signer, configurer: c, lookupEnv: lookupEnv, reader: reader}
}

// OracleConfigDigest is the digest of a candidate's configuration as the
// deployment declares it: its kind, its section and the names of the
// variables its secrets come from (never their values). Editing the
// candidate between an episode's registration and its scoring changes it.
func OracleConfigDigest(c *config.Candidate) string {
	secrets := map[string]any{}
	for slot, env := range c.Secrets {
		secrets[slot] = env
	}
	opts := map[string]any{}
	for k, v := range c.OptionParams {
		opts[k] = fmt.Sprintf("%+v", v)
	}
	doc := map[string]any{"kind": c.Kind, "section": c.Section, "secrets": secrets, "option_params": opts}
	sum := sha256.Sum256([]byte(judge.CanonicalJSON(doc)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Read configures the deployment's candidates with the subject as run
// parameters, selects the strongest tier (ties by declaration order) and
// reads it once; with a pin it configures and reads the pinned candidate
// only (reward.Oracle). Every failure is an unreachable snapshot.
//
// A value of the read candidate's configured secrets found in a baseline
// record is replaced by its slot's placeholder (the reward store keeps the
// baseline; RestoreBaseline puts the value back before judging); the after
// read reaches the judge as read. Every candidate's secrets are masked in
// a reason. The receipt carries no value.
func (o RewardOracle) Read(ctx context.Context, deployment string, effects []*judge.Contract, identity map[string]string, phase string, pin *reward.OraclePin) reward.OracleRead {
	read := o.read(ctx, deployment, effects, identity, phase, pin)
	dep := o.deployment(deployment)
	if dep == nil {
		read.Snapshot.Reason = "the deployment could not be read again to mask its secrets; the reason is withheld"
		read.Snapshot.Records = nil
		read.Snapshot.Reachable = false
		return read
	}
	masks := make([]secretMask, len(dep.Candidates))
	for i := range dep.Candidates {
		masks[i] = maskSecrets(o.lookupEnv, &dep.Candidates[i])
	}
	all := joinMasks(masks...)
	read.Snapshot.Reason = all.text(read.Snapshot.Reason)
	if phase != "after" && read.Snapshot.Reachable && read.Pin != nil && read.Pin.Index < len(dep.Candidates) {
		mask := maskSecrets(o.lookupEnv, &dep.Candidates[read.Pin.Index])
		if mask.active() {
			recs := make([]judge.Record, len(read.Snapshot.Records))
			for i, r := range read.Snapshot.Records {
				recs[i] = judge.Record(mask.object(r, mask.stored))
			}
			read.Snapshot.Records = recs
		}
	}
	return read
}

// RestoreBaseline puts the pinned candidate's current secret values back
// where a stored baseline holds their placeholders (reward.BaselineRestorer).
func (o RewardOracle) RestoreBaseline(deployment string, pin *reward.OraclePin, recs []judge.Record) []judge.Record {
	dep := o.deployment(deployment)
	if dep == nil || pin == nil || pin.Index < 0 || pin.Index >= len(dep.Candidates) {
		return recs
	}
	mask := maskSecrets(o.lookupEnv, &dep.Candidates[pin.Index])
	if !mask.active() {
		return recs
	}
	out := make([]judge.Record, len(recs))
	for i, r := range recs {
		out[i] = judge.Record(mask.object(r, mask.restoreText))
	}
	return out
}

func (o RewardOracle) deployment(name string) *config.Deployment {
	data, err := registeredDeployment(o.daemon, name)
	if err != nil {
		return nil
	}
	dep, _, err := parseDeployment(data)
	if err != nil {
		return nil
	}
	return dep
}

func (o RewardOracle) read(ctx context.Context, deployment string, effects []*judge.Contract, identity map[string]string, phase string, pin *reward.OraclePin) reward.OracleRead {
	fail := func(read reward.OracleRead, err error) reward.OracleRead {
		read.Snapshot = judge.Snapshot{Reachable: false, Reason: err.Error()}
		return read
	}
	data, err := registeredDeployment(o.daemon, deployment)
	if err != nil {
		return fail(reward.OracleRead{Pin: pin}, err)
	}
	dep, _, err := parseDeployment(data)
	if err != nil {
		return fail(reward.OracleRead{Pin: pin}, err)
	}
	var inst *pluginhost.Instance
	var best int
	if pin != nil {
		read := reward.OracleRead{Pin: pin, Kind: pin.Kind, Tier: pin.Tier}
		changed := func(format string, args ...any) reward.OracleRead {
			read.Code = reward.ReasonOracleChanged
			return fail(read, fmt.Errorf("deployment %q: the oracle candidate %d (%s) that read the baseline "+format+"; the episode is not read through another candidate", append([]any{deployment, pin.Index, pin.Kind}, args...)...))
		}
		if pin.Index < 0 || pin.Index >= len(dep.Candidates) {
			return changed("is no longer in the deployment (it has %d candidates)", len(dep.Candidates))
		}
		c := &dep.Candidates[pin.Index]
		if c.Kind != pin.Kind {
			return changed("is now of kind %s", clip(c.Kind))
		}
		if OracleConfigDigest(c) != pin.ConfigDigest {
			return changed("was reconfigured since the episode was registered")
		}
		one := &config.Deployment{Candidates: []config.Candidate{*c}, Policy: dep.Policy}
		insts, errs := o.configurer.configure(ctx, one, effects, identity, false)
		if insts[0] == nil {
			read.Code = reward.ReasonOracleUnavailable
			return fail(read, fmt.Errorf("deployment %q: the oracle candidate %d (%s) that read the baseline cannot be configured: %w", deployment, pin.Index, pin.Kind, errors.Join(errs...)))
		}
		inst, best = insts[0], pin.Index
		if inst.Kind() != pin.Kind || int(inst.Info().Tier) != pin.Tier {
			return changed("now reports kind %s tier %d", clip(inst.Kind()), inst.Info().Tier)
		}
	} else {
		insts, errs := o.configurer.configure(ctx, dep, effects, identity, false)
		best = -1
		for i, inst := range insts {
			if inst != nil && (best < 0 || inst.Info().Tier < insts[best].Info().Tier) {
				best = i
			}
		}
		if best < 0 {
			return fail(reward.OracleRead{}, errors.Join(errs...))
		}
		inst = insts[best]
	}
	read := reward.OracleRead{Tier: int(inst.Info().Tier), Kind: inst.Kind(), Pin: &reward.OraclePin{
		Index: best, Kind: inst.Kind(), Tier: int(inst.Info().Tier), ConfigDigest: OracleConfigDigest(&dep.Candidates[best])}}
	if err := checkSQLiteFiles(&config.Deployment{Candidates: dep.Candidates[best : best+1]}); err != nil {
		return fail(read, err)
	}
	all := make([]int, len(effects))
	for i := range all {
		all[i] = i
	}
	req := captureRequest("reward", phase, 0, effects, all)
	rctx, cancel := context.WithTimeout(ctx, baselineReadTimeout(effects))
	defer cancel()
	if phase == "after" {
		snap, _ := o.reader.snapshot(rctx, inst, req)
		read.Snapshot = snap
		return read
	}
	capt, err := inst.CaptureBefore(rctx, req)
	if err != nil {
		return fail(read, err)
	}
	defer capt.Close()
	if !capt.Reachable {
		read.Snapshot = unreachableCapture(capt)
		return read
	}
	recs := []judge.Record{}
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return fail(read, err)
		}
		for _, raw := range batch {
			r, err := decodeRecord(raw)
			if err != nil {
				return fail(read, err)
			}
			recs = append(recs, r)
		}
	}
	read.Snapshot = judge.Snapshot{Reachable: true, Records: recs}
	return read
}

// LoadContracts loads the reward contracts of the daemon config. A
// certificate must be signed by the daemon's key or one listed under
// rewards_trust; the oracle deployment must be registered (and a SQLite
// file it names must be one). Every refusal names the file and the rule.
func (o RewardOracle) LoadContracts() (map[string]*reward.Contract, error) {
	out := map[string]*reward.Contract{}
	if o.daemon == nil || len(o.daemon.Rewards) == 0 {
		return out, nil
	}
	trust := reward.Trust{Keys: map[string][]byte{}}
	if o.signer != nil {
		trust.Keys[o.signer.KeyID()] = o.signer.PublicKey()
	}
	for i, text := range o.daemon.RewardsTrust {
		pub, err := receipt.ParsePublicKey(text)
		if err != nil {
			return nil, fmt.Errorf("rewards_trust[%d]: %w", i, err)
		}
		trust.Keys[receipt.KeyID(pub)] = pub
	}
	for name, dir := range o.daemon.Rewards {
		c, err := reward.LoadContract(name, dir, trust)
		if err != nil {
			return nil, fmt.Errorf("rewards.%s: %w", name, err)
		}
		if err := o.CheckDeployment(c.Deployment); err != nil {
			return nil, fmt.Errorf("rewards.%s: %s: deployment %q: %w", name, dir+"/"+reward.ContractFile, c.Deployment, err)
		}
		out[name] = c
	}
	return out, nil
}

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
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
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
	// readCensus reads a census (censusReader.readCensus); nil leaves every
	// census unread (unreachable).
	readCensus func(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest, before bool, fields []string) judge.Snapshot
	// writeSets is the change-log source of a candidate with changes:
	// (Manager.writeSetSource); nil reads no write set (unreachable).
	writeSets writeSetSourceFunc
	// holds keeps an episode's hold on the slot in the store.
	holds holdStore
	now   func() time.Time
}

// NewRewardOracle is the reward oracle over m's deployments, adapters and
// keys.
func NewRewardOracle(m *Manager) RewardOracle {
	o := newRewardOracle(m.daemon, m.signer, m.configurer(), m.lookupEnv, afterReader{keys: m.keys, metrics: m.metrics})
	o.readCensus, o.now, o.writeSets, o.holds = censusReader{m.keys, m.metrics}.readCensus, m.clock.Now, m.writeSetSource, m.holdStore
	return o
}

// newRewardOracle reads the deployments registered in daemon through c,
// masks the secrets lookupEnv resolves, takes after reads with reader and
// trusts certificates signed by signer (both daemon and signer may be nil).
func newRewardOracle(daemon *config.Daemon, signer *signing.Signer, c *configurer, lookupEnv func(string) (string, bool), reader afterReader) RewardOracle {
	return RewardOracle{daemon: daemon, signer: signer, configurer: c, lookupEnv: lookupEnv, reader: reader, now: time.Now}
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
		if read.Census != nil {
			read.Census = &judge.Snapshot{Reason: read.Snapshot.Reason}
		}
		return read
	}
	masks := make([]secretMask, len(dep.Candidates))
	for i := range dep.Candidates {
		masks[i] = maskSecrets(o.lookupEnv, &dep.Candidates[i])
	}
	all := joinMasks(masks...)
	read.Snapshot.Reason = all.text(read.Snapshot.Reason)
	if read.Census != nil {
		read.Census.Reason = all.text(read.Census.Reason)
	}
	if phase != "after" && read.Snapshot.Reachable && read.Pin != nil && read.Pin.Index < len(dep.Candidates) {
		mask := maskSecrets(o.lookupEnv, &dep.Candidates[read.Pin.Index])
		if mask.active() {
			read.Snapshot.Records = maskRecords(mask, read.Snapshot.Records)
			if read.Census != nil {
				read.Census.Records = maskRecords(mask, read.Census.Records)
			}
		}
	}
	return read
}

// maskRecords replaces every secret value mask knows in recs by its slot's
// placeholder (RestoreBaseline puts it back).
func maskRecords(mask secretMask, recs []judge.Record) []judge.Record {
	out := make([]judge.Record, len(recs))
	for i, r := range recs {
		out[i] = judge.Record(mask.object(r, mask.stored))
	}
	return out
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
	fail := oracleFailed
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
		var read reward.OracleRead
		var ok bool
		if inst, read, ok = o.pinnedInstance(ctx, deployment, dep, effects, identity, pin); !ok {
			return read
		}
		best = pin.Index
	} else {
		insts, errs := o.configurer.configure(ctx, dep, effects, identity, false)
		best = -1
		for i, inst := range insts {
			if inst != nil && (best < 0 || inst.Info().Tier < insts[best].Info().Tier) {
				best = i
			}
		}
		if insts[0] == nil && phase != "after" {
			// The operator's first choice is down: never pin another
			// for the episode's life without saying so.
			e := &reward.OracleUnavailableError{Candidate: fmt.Sprintf("candidate 0 (%s)", clip(dep.Candidates[0].Kind)), Err: errors.Join(errs...)}
			if best >= 0 {
				e.Fallback = fmt.Sprintf("candidate %d (%s)", best, clip(insts[best].Kind()))
			}
			return fail(reward.OracleRead{Refused: e}, e)
		}
		if best < 0 {
			return fail(reward.OracleRead{}, errors.Join(errs...))
		}
		inst = insts[best]
	}
	read := reward.OracleRead{Tier: int(inst.Info().Tier), Kind: inst.Kind(), Pin: &reward.OraclePin{
		Index: best, Kind: inst.Kind(), Tier: int(inst.Info().Tier), ConfigDigest: OracleConfigDigest(&dep.Candidates[best])}}
	if pin != nil {
		read.Pin.WriteSetFrom = pin.WriteSetFrom
	}
	cand := &dep.Candidates[best]
	read.AbsenceNotProof = inst.Info().AbsenceNotProof
	if pin == nil && phase != "after" {
		// The guard Begin applies: a change claim over a narrowed read
		// must prove its newness, or the episode is not registered.
		if err := checkRewardNewness(policyOf(o.daemon, dep, nil), dep, best, effects); err != nil {
			read.Refused = err
			return fail(read, err)
		}
	}
	if err := checkSQLiteFiles(&config.Deployment{Candidates: dep.Candidates[best : best+1]}); err != nil {
		return fail(read, err)
	}
	all := make([]int, len(effects))
	for i := range all {
		all[i] = i
	}
	req := captureRequest("reward", phase, 0, effects, all)
	req.ReadFields, req.ExpectedValues = contractReads(effects, all, freshnessField(cand.Freshness))
	rctx, cancel := context.WithTimeout(ctx, baselineReadTimeout(effects))
	defer cancel()
	if phase == "after" {
		snap, _ := o.reader.snapshot(rctx, inst, req)
		read.Snapshot = snap
		// The census after the read, as a session reads it: every record
		// the read saw is in it.
		read.Census = o.census(rctx, dep, best, effects, phase)
		if usesRewardWriteSet(cand, effects) {
			read.WriteSet = o.rewardWriteSet(rctx, deployment, dep, best, identity, pin)
		}
		return read
	}
	snap, err := rewardBaseline(rctx, inst, req)
	if err != nil {
		return fail(read, err)
	}
	read.Snapshot = snap
	read.Census = o.census(rctx, dep, best, effects, phase)
	if pin == nil && usesRewardWriteSet(cand, effects) {
		from, err := o.rewardWriteSetFrom(rctx, deployment, dep, best, identity)
		if err != nil {
			read.Refused = fmt.Errorf("the write set (changes:) of candidate %d cannot be read (%w): the episode is not registered, so do not roll it out", best, err)
			return fail(read, read.Refused)
		}
		read.Pin.WriteSetFrom = string(from)
	}
	return read
}

// oracleFailed is read answered with an unreachable snapshot saying err.
func oracleFailed(read reward.OracleRead, err error) reward.OracleRead {
	read.Snapshot = judge.Snapshot{Reachable: false, Reason: err.Error()}
	return read
}

// pinnedInstance configures the oracle candidate pin names, the one that
// read the episode's baseline; one that is gone, changed or cannot be
// configured answers the read that says so (and false): an episode is
// never read through another candidate.
func (o RewardOracle) pinnedInstance(ctx context.Context, deployment string, dep *config.Deployment, effects []*judge.Contract, identity map[string]string, pin *reward.OraclePin) (*pluginhost.Instance, reward.OracleRead, bool) {
	fail := oracleFailed
	read := reward.OracleRead{Pin: pin, Kind: pin.Kind, Tier: pin.Tier}
	changed := func(format string, args ...any) reward.OracleRead {
		read.Code = reward.ReasonOracleChanged
		return fail(read, fmt.Errorf("deployment %q: the oracle candidate %d (%s) that read the baseline "+format+"; the episode is not read through another candidate", append([]any{deployment, pin.Index, pin.Kind}, args...)...))
	}
	if pin.Index < 0 || pin.Index >= len(dep.Candidates) {
		return nil, changed("is no longer in the deployment (it has %d candidates)", len(dep.Candidates)), false
	}
	c := &dep.Candidates[pin.Index]
	if c.Kind != pin.Kind {
		return nil, changed("is now of kind %s", clip(c.Kind)), false
	}
	if OracleConfigDigest(c) != pin.ConfigDigest {
		return nil, changed("was reconfigured since the episode was registered"), false
	}
	one := &config.Deployment{Candidates: []config.Candidate{*c}, Policy: dep.Policy}
	insts, errs := o.configurer.configure(ctx, one, effects, identity, false)
	if insts[0] == nil {
		read.Code = reward.ReasonOracleUnavailable
		return nil, fail(read, fmt.Errorf("deployment %q: the oracle candidate %d (%s) that read the baseline cannot be configured: %w", deployment, pin.Index, pin.Kind, errors.Join(errs...))), false
	}
	inst := insts[0]
	if inst.Kind() != pin.Kind || int(inst.Info().Tier) != pin.Tier {
		return nil, changed("now reports kind %s tier %d", clip(inst.Kind()), inst.Info().Tier), false
	}
	return inst, read, true
}

// rewardBaseline reads an episode's baseline whole through inst; an
// unreachable read is a snapshot, a broken stream an error.
func rewardBaseline(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest) (judge.Snapshot, error) {
	capt, err := inst.CaptureBefore(ctx, req)
	if err != nil {
		return judge.Snapshot{}, err
	}
	defer capt.Close()
	if !capt.Reachable {
		return unreachableCapture(capt), nil
	}
	recs := []judge.Record{}
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return judge.Snapshot{}, err
		}
		for _, raw := range batch {
			r, err := decodeRecord(raw)
			if err != nil {
				return judge.Snapshot{}, err
			}
			recs = append(recs, r)
		}
	}
	return judge.Snapshot{Reachable: true, Records: recs}, nil
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

// checkRewardNewness applies policy.require_proven_newness to a
// registration read through candidate ci, as Begin applies it to a
// session's selected candidates (workflow.CheckNewness).
func checkRewardNewness(p workflow.Effective, dep *config.Deployment, ci int, effects []*judge.Contract) error {
	r := readerOf(dep, ci)
	for i, e := range effects {
		claim := judge.Effect{Kind: e.Kind, CountNewOnly: e.CountNewOnly, NewOnly: e.NewOnly}
		if fs := workflow.CheckNewness(p, claim, r, i, fmt.Sprintf("effects[%d]", i)); len(fs) > 0 {
			return errors.New(fs[0].Message)
		}
	}
	return nil
}

// census reads candidate ci's census beside a reward read (the before
// census at registration, the after census at scoring); nil when the
// candidate declares none or no effect judges newness or loss. A census
// that cannot be configured or read is an unreachable snapshot: the
// judge leaves what needs it INDETERMINATE.
func (o RewardOracle) census(ctx context.Context, dep *config.Deployment, ci int, effects []*judge.Contract, phase string) *judge.Snapshot {
	fields := censusFields(effects)
	if dep.Candidates[ci].Census == nil || len(fields) == 0 {
		return nil
	}
	if o.readCensus == nil {
		return &judge.Snapshot{Reason: "this oracle reads no census"}
	}
	inst, err := o.configurer.census(ctx, dep, ci, effects)
	if err != nil {
		return &judge.Snapshot{Reason: err.Error()}
	}
	all := make([]int, len(effects))
	for i := range all {
		all[i] = i
	}
	s := o.readCensus(ctx, inst, censusRequest("reward", "census-"+phase, 0, effects, all), phase != "after", fields)
	return &s
}

// Judge judges an episode's effects through the one judging path (prove)
// under the deployment's options for the pinned candidate: its census (the
// one read beside the baseline and the one read beside the after read),
// its freshness window and the adapter's absence rule (reward.Oracle).
// deployment "" is a calibration case: no deployment's options. A
// deployment or candidate that cannot be read again leaves every effect
// INDETERMINATE.
func (o RewardOracle) Judge(deployment string, pin *reward.OraclePin, effects []*judge.Contract, before, after reward.OracleRead) reward.Proof {
	reads := proofReads{before: before.Snapshot, after: after.Snapshot}
	if deployment == "" {
		return rewardProof(prove(nil, effects, reads, proofOptions(nil, false, nil, time.Time{})))
	}
	dep := o.deployment(deployment)
	if dep == nil || pin == nil || pin.Index < 0 || pin.Index >= len(dep.Candidates) {
		out := make([]judge.Verdict, len(effects))
		for k, c := range effects {
			out[k] = judge.Unreachable(c, fmt.Sprintf("deployment %q or its oracle candidate cannot be read again to judge by its options", deployment))
		}
		return reward.Proof{Verdicts: out}
	}
	cand := &dep.Candidates[pin.Index]
	var census *judge.Census
	if cand.Census != nil || before.Census != nil || after.Census != nil {
		missing := judge.Snapshot{Reason: "no census was read beside this read (the episode was registered before the candidate declared census:, or the candidate no longer declares it)"}
		census = &judge.Census{Before: censusRead(before.Census, missing), After: censusRead(after.Census, missing)}
	}
	opts := proofOptions(cand, before.AbsenceNotProof || after.AbsenceNotProof, census, o.now().UTC())
	if usesRewardWriteSet(cand, effects) {
		// Never the narrowed read alone: a scoring read without its
		// write set leaves the change claims CHANGES_UNUSABLE.
		ws := after.WriteSet
		if ws == nil {
			ws = &judge.WriteSet{Reason: "no write set was read beside the scoring read"}
		}
		opts = withWriteSet(opts, ws)
	}
	return rewardProof(prove(cand, effects, reads, opts))
}

// rewardProof is a Proof as the reward service records it.
func rewardProof(p Proof) reward.Proof {
	return reward.Proof{Verdicts: p.Verdicts, Newness: p.Newness, Census: p.Census, CensusUsable: p.CensusUsable}
}

// censusRead is the census read s, or missing when none was read.
func censusRead(s *judge.Snapshot, missing judge.Snapshot) judge.Snapshot {
	if s == nil {
		return missing
	}
	return *s
}

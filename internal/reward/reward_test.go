package reward

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

const mockmedContract = `schema: verifierd.reward-contract/v1
id: mockmed-triage
version: "1"
deployment: mockmed
identity_keys: [patient_id]
components: [{name: terminal_effect, weight: 1}]
scoring: {wrong_effect_reward: 0.0}
certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}
`

const mockmedRequired = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  expected_count: 1
  count_new_only: true
`

const mockmedForbidden = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Discharge}
  expected_count: 1
`

// writeContract writes a contract directory; an empty text leaves a file out.
func writeContract(t *testing.T, contract, required, forbidden string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{ContractFile: contract, RequiredFile: required, ForbiddenFile: forbidden} {
		if text == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testSigner(t *testing.T) *signing.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return signing.New(priv)
}

func trustOf(s *signing.Signer) Trust {
	return Trust{Keys: map[string][]byte{s.KeyID(): s.PublicKey()}}
}

func TestClopperPearsonUpper(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		k, n   int
		digits int
		want   string
	}{
		{0, 300, 7, "0.0099361"},
		{0, 15, 6, "0.181036"},
		{0, 20, 4, "0.1391"},
		{1, 20, 4, "0.2161"},
		{20, 20, 1, "1.0"},
	} {
		got := fmt.Sprintf("%.*f", tt.digits, ClopperPearsonUpper(tt.k, tt.n, 0.05))
		if got != tt.want {
			t.Errorf("k=%d n=%d: ε = %s, want %s", tt.k, tt.n, got, tt.want)
		}
	}
	// The bound inverts the exact CDF: at ε the tail is δ.
	eps := ClopperPearsonUpper(3, 100, 0.05)
	if cdf := BinomialCDF(3, 100, eps); cdf < 0.0499999 || cdf > 0.0500001 {
		t.Errorf("P[Bin(100, %g) ≤ 3] = %g, want 0.05", eps, cdf)
	}
}

func TestCalibrateMockMed(t *testing.T) {
	t.Parallel()
	c, err := LoadContract("mockmed", writeContract(t, mockmedContract, mockmedRequired, mockmedForbidden), Trust{})
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Calibrate(c, 300, 0.05, DefaultSeed, plainJudge)
	if err != nil {
		t.Fatal(err)
	}
	if cal.FalseAccepts != 0 || fmt.Sprintf("%.7f", cal.Epsilon) != "0.0099361" {
		t.Errorf("false accepts %d, ε %.7f; want 0 and 0.0099361", cal.FalseAccepts, cal.Epsilon)
	}
	want := "duplicate_record,extra_record,forbidden_present,missing_record,wrong_field,wrong_subject"
	if got := strings.Join(cal.ClassesPlaced, ","); got != want {
		t.Errorf("classes sampled %s, want %s", got, want)
	}
	if cal.CorpusDigest != c.CorpusDigest {
		t.Errorf("corpus digest %s, want the contract's %s", cal.CorpusDigest, c.CorpusDigest)
	}
}

func TestCorpusMergesFieldEquals(t *testing.T) {
	t.Parallel()
	req := mockmedRequired + `- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: status
  value: saved
`
	c, err := LoadContract("m", writeContract(t, mockmedContract, req, ""), Trust{})
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := DeriveCorpus(c)
	if len(cp.Intended) != 1 || cp.Intended[0].Fields["status"].Literal != "saved" || cp.Intended[0].Fields["type"].Literal != "Triage" {
		t.Fatalf("intended %+v, want one Triage row with status saved", cp.Intended)
	}
}

func TestCalibrateRefusesContradictoryContract(t *testing.T) {
	t.Parallel()
	// The read-back asks for type Radiology on the Triage selector: a clean
	// store built from these effects cannot be verified.
	req := mockmedRequired + `- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: type
  value: Radiology
`
	c, err := LoadContract("m", writeContract(t, mockmedContract, req, ""), Trust{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Calibrate(c, 300, 0.05, DefaultSeed, plainJudge)
	if !errors.Is(err, ErrCalibrationRefused) || !strings.Contains(err.Error(), "does not exercise the contract") {
		t.Fatalf("got %v, want the control trial's refusal", err)
	}
}

func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	signer, other := testSigner(t), testSigner(t)
	// A certificate for another contract (required type Radiology).
	otherDir := writeContract(t, mockmedContract, strings.Replace(mockmedRequired, "Triage", "Radiology", 1), mockmedForbidden)
	oc, err := LoadContract("other", otherDir, trustOf(signer))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Calibrate(oc, 50, 0.05, 1, plainJudge)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := SignCertificate(signer, NewCertificate(oc, cal, signer.KeyID(), mustNow()))
	if err != nil {
		t.Fatal(err)
	}
	// A certificate for the right contract, signed by an untrusted key.
	mc, err := LoadContract("m", writeContract(t, mockmedContract, mockmedRequired, mockmedForbidden), Trust{})
	if err != nil {
		t.Fatal(err)
	}
	mcal, _ := Calibrate(mc, 50, 0.05, 1, plainJudge)
	untrusted, _ := SignCertificate(other, NewCertificate(mc, mcal, other.KeyID(), mustNow()))
	own, _ := SignCertificate(signer, NewCertificate(mc, mcal, signer.KeyID(), mustNow()))

	tests := []struct {
		name                          string
		contract, required, forbidden string
		cert                          []byte
		file, rule                    string
	}{
		{"no required effects", mockmedContract, "[]\n", "", nil, RequiredFile, RuleNoRequiredEffects},
		{"no change claim", mockmedContract, "- kind: record_written\n  match: {patient_id: {param: patient_id}}\n", "", nil, RequiredFile, RuleNoChangeClaim},
		{"param not an identity key", mockmedContract, mockmedRequired + "- kind: field_equals\n  match: {patient_id: {param: patient_id}}\n  field: note\n  value: {param: note}\n", "", nil, RequiredFile, RuleUnknownParam},
		{"identity key not selected", strings.Replace(mockmedContract, "[patient_id]", "[patient_id, visit]", 1), mockmedRequired, "", nil, RequiredFile, RuleIdentityNotBound},
		{"identity key only in a value", strings.Replace(mockmedContract, "[patient_id]", "[patient_id, visit]", 1), mockmedRequired + "- kind: field_equals\n  match: {patient_id: {param: patient_id}}\n  field: visit\n  value: {param: visit}\n", "", nil, RequiredFile, RuleIdentityNotBound},
		{"policy names another corpus", strings.Replace(mockmedContract, "threshold: 0.5", "threshold: 0.5, calibration_corpus_digest: \"sha256:"+strings.Repeat("0", 64)+"\"", 1), mockmedRequired, mockmedForbidden, nil, ContractFile, RuleCertificateCorpus},
		{"certificate of another contract", mockmedContract, mockmedRequired, mockmedForbidden, foreign, CertificateFile, RuleCertificateDigest},
		{"certificate by an untrusted key", mockmedContract, mockmedRequired, mockmedForbidden, untrusted, CertificateFile, RuleCertificateUntrust},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := writeContract(t, tt.contract, tt.required, tt.forbidden)
			if tt.cert != nil {
				if err := os.WriteFile(filepath.Join(dir, CertificateFile), tt.cert, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadContract("m", dir, trustOf(signer))
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			le, ok := refusal.As(err)
			if !ok || le.Code != tt.rule || filepath.Base(le.Path) != tt.file || !strings.Contains(err.Error(), tt.file+": "+tt.rule+": ") {
				t.Fatalf("got %v, want rule %s in %s", err, tt.rule, tt.file)
			}
		})
	}
	// The daemon's own certificate loads and is current at update 0.
	dir := writeContract(t, mockmedContract, mockmedRequired, mockmedForbidden)
	if err := os.WriteFile(filepath.Join(dir, CertificateFile), own, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadContract("m", dir, trustOf(signer))
	if err != nil || c.Certificate.State(0) != CertCurrent || c.Certificate.State(1000) != CertExpired {
		t.Fatalf("own certificate: %v", err)
	}
	// Unscored can never be declared 0.
	bad := strings.Replace(mockmedContract, "scoring: {wrong_effect_reward: 0.0}", "scoring: {uncertain_episodes: 0}", 1)
	if _, err := LoadContract("m", writeContract(t, bad, mockmedRequired, ""), Trust{}); err == nil {
		t.Fatal("a contract scoring uncertain episodes as 0 loaded")
	}
}

// memOracle is a table the test writes as the rollout would.
type memOracle struct {
	mu          sync.Mutex
	rows        []judge.Record
	tier        int
	kind        string
	unreachable bool
	// index is the candidate index the oracle reports reading; a test
	// moves it after the registration to stand for an oracle that read
	// another candidate than the pinned one.
	index int
}

func (o *memOracle) add(id int, patient, typ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows = append(o.rows, judge.Record{"id": json.Number(fmt.Sprint(id)), "patient_id": patient, "type": typ})
}

func (o *memOracle) Read(_ context.Context, _ string, _ []*judge.Contract, _ map[string]string, _ string, _ *OraclePin) OracleRead {
	o.mu.Lock()
	defer o.mu.Unlock()
	kind := o.kind
	if kind == "" {
		kind = "mem"
	}
	pin := &OraclePin{Index: o.index, Kind: kind, Tier: o.tier, ConfigDigest: "sha256:mem"}
	if o.unreachable {
		return OracleRead{Tier: o.tier, Kind: kind, Pin: pin, Snapshot: judge.Snapshot{Reason: "store offline"}}
	}
	return OracleRead{Tier: o.tier, Kind: kind, Pin: pin, Snapshot: judge.Snapshot{Reachable: true, Records: append([]judge.Record(nil), o.rows...)}}
}

// plainJudge judges with no deployment's options. The daemon's one judging
// path is in internal/session, which imports this package; these tests of
// the outcome table and the service stand in for it with the judge itself
// (a deployment's census and freshness are tested there, over real reads).
func plainJudge(effects []*judge.Contract, before, after OracleRead) Proof {
	out := make([]judge.Verdict, len(effects))
	for i, c := range effects {
		out[i] = judge.Judge(c, before.Snapshot, after.Snapshot, judge.Options{})
	}
	return Proof{Verdicts: out}
}

// Judge implements Oracle with plainJudge.
func (o *memOracle) Judge(_ string, _ *OraclePin, effects []*judge.Contract, before, after OracleRead) Proof {
	return plainJudge(effects, before, after)
}

type rig struct {
	svc    *Service
	oracle *memOracle
	c      *Contract
	dir    string
	signer *signing.Signer
	data   string
}

func newRig(t *testing.T, tier int) *rig {
	t.Helper()
	signer := testSigner(t)
	dir := writeContract(t, mockmedContract, mockmedRequired, mockmedForbidden)
	c, err := LoadContract("mockmed", dir, trustOf(signer))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Calibrate(c, 300, 0.05, DefaultSeed, plainJudge)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := SignCertificate(signer, NewCertificate(c, cal, signer.KeyID(), mustNow()))
	if err := os.WriteFile(filepath.Join(dir, CertificateFile), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = LoadContract("mockmed", dir, trustOf(signer)); err != nil {
		t.Fatal(err)
	}
	r := &rig{oracle: &memOracle{tier: tier}, c: c, dir: dir, signer: signer, data: t.TempDir()}
	r.open(t)
	return r
}

func (r *rig) open(t *testing.T) {
	t.Helper()
	st, err := bolt.Open(r.data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r.svc = &Service{Contracts: map[string]*Contract{"mockmed": r.c}, Oracle: r.oracle, Store: st, Signer: r.signer, EvidenceKey: []byte("k")}
}

func (r *rig) descriptor(episode, checkpoint string, update int64, extra string) []byte {
	return []byte(fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": %q, "policy_update": %d, "reward_contract_digest": %q%s}`, episode, checkpoint, update, r.c.Digest, extra))
}

func mustNow() time.Time { return time.Now() }

// TestRungDecidesCertification: a receipt states the read's oracle rung,
// and only rung 2 or above (the system of record itself) certifies: a
// separate session of the application (rung 1), a screen or a file (rung
// 0) never do, whatever tier the adapter declares.
func TestRungDecidesCertification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind      string
		tier      int
		rung      int
		certified bool
	}{
		{"sql", 1, 2, true},
		{"rest", 1, 2, true},
		{"mem", 1, 2, true}, // a plugin at tier 1 reads the system of record
		{"mem", 2, 1, false},
		{"ui_readback", 2, 1, false},
		{"onscreen", 3, 0, false},
		{"document-hash", 1, 0, false},
		{"file", 1, 0, false},
	} {
		t.Run(fmt.Sprintf("%s at tier %d", tc.kind, tc.tier), func(t *testing.T) {
			t.Parallel()
			r := newRig(t, tc.tier)
			r.oracle.kind = tc.kind
			ctx := context.Background()
			if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
				t.Fatal(err)
			}
			r.oracle.add(10, "patient-0001", "Triage")
			res, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, ""))
			if err != nil {
				t.Fatal(err)
			}
			rc := res.Receipt
			if rc.OracleRung != tc.rung || rc.OracleTier != tc.tier || rc.Certified != tc.certified || rc.DevelopmentOnly == tc.certified || rc.RewardOutcome != OutcomeVerified {
				t.Fatalf("rung %d tier %d certified %v dev_only %v outcome %s; want rung %d tier %d certified %v",
					rc.OracleRung, rc.OracleTier, rc.Certified, rc.DevelopmentOnly, rc.RewardOutcome, tc.rung, tc.tier, tc.certified)
			}
			var signed struct {
				OracleRung *int `json:"oracle_rung"`
			}
			if err := json.Unmarshal(res.Envelope.Payload, &signed); err != nil || signed.OracleRung == nil || *signed.OracleRung != tc.rung {
				t.Fatalf("signed payload oracle_rung %v (%v), want %d", signed.OracleRung, err, tc.rung)
			}
		})
	}
}

func TestEpisodeOutcomes(t *testing.T) {
	t.Parallel()
	one := 1.0
	zero := 0.0
	tests := []struct {
		name      string
		tier      int
		setup     func(o *memOracle)
		rollout   func(o *memOracle)
		extra     string // descriptor members
		outcome   string
		scalar    *float64
		certified bool
		devOnly   bool
	}{
		{"honest", 1, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, "", OutcomeVerified, &one, true, false},
		{"banner lie", 1, nil, func(*memOracle) {}, "", OutcomeWrongEffect, &zero, true, false},
		{"double submit", 1, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage"); o.add(11, "patient-0001", "Triage") }, "", OutcomeWrongEffect, &zero, true, false},
		{"idle with an old row", 1, func(o *memOracle) { o.add(3, "patient-0001", "Triage") }, func(*memOracle) {}, "", OutcomeWrongEffect, &zero, true, false},
		{"forbidden discharge", 1, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage"); o.add(11, "patient-0001", "Discharge") }, "", OutcomeWrongEffect, &zero, true, false},
		{"tier 3 honest", 3, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, "", OutcomeVerified, &one, false, true},
		{"tier 4 honest", 4, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, "", OutcomeVerified, &one, false, true},
		// A local document declares tier 1, yet whoever writes the file
		// writes the answer: scored, development only, never certified.
		{"document honest", 1, func(o *memOracle) { o.kind = "document" }, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, "", OutcomeVerified, &one, false, true},
		{"file honest", 1, func(o *memOracle) { o.kind = "file" }, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, "", OutcomeVerified, &one, false, true},
		// Unscored receipts certify nothing: no scalar, nothing certified.
		{"unreachable store", 1, nil, func(o *memOracle) { o.unreachable = true }, "", OutcomeFailedPlatform, nil, false, false},
		{"halted, nothing written", 1, nil, func(*memOracle) {}, `, "runtime_signal": "halted_before_effect"`, OutcomeHaltedBeforeEffect, &zero, true, false},
		{"refused, yet written", 1, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, `, "metadata": {"runtime_signal": "refused"}`, OutcomeReconciliationRequired, nil, false, false},
		{"platform failure reported", 1, nil, func(o *memOracle) { o.add(10, "patient-0001", "Triage") }, `, "runtime_signal": "failed_platform"`, OutcomeFailedPlatform, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, tt.tier)
			if tt.setup != nil {
				tt.setup(r.oracle)
			}
			ctx := context.Background()
			if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
				t.Fatal(err)
			}
			tt.rollout(r.oracle)
			res, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, tt.extra))
			if err != nil {
				t.Fatal(err)
			}
			rc := res.Receipt
			if rc.RewardOutcome != tt.outcome || rc.Certified != tt.certified || rc.DevelopmentOnly != tt.devOnly {
				t.Errorf("outcome %s certified %v dev_only %v; want %s %v %v", rc.RewardOutcome, rc.Certified, rc.DevelopmentOnly, tt.outcome, tt.certified, tt.devOnly)
			}
			switch {
			case tt.scalar == nil && (rc.ScalarReward != nil || !rc.Unscored || len(rc.Components) != 0):
				t.Errorf("scalar %v unscored %v components %v; want null, unscored, none", rc.ScalarReward, rc.Unscored, rc.Components)
			case tt.scalar != nil && (rc.ScalarReward == nil || *rc.ScalarReward != *tt.scalar):
				t.Errorf("scalar %v, want %v", rc.ScalarReward, *tt.scalar)
			}
			if payload, err := res.Envelope.Open(r.signer.PublicKey()); err != nil || !strings.Contains(string(payload), rc.ReceiptID) {
				t.Errorf("envelope does not open with the daemon key: %v", err)
			}
			assertNoValues(t, res)
		})
	}
}

// assertNoValues searches a result for the subject's identity, record
// values and forbidden metadata keys.
func assertNoValues(t *testing.T, v any) {
	t.Helper()
	raw, _ := json.Marshal(v)
	text := string(raw)
	if env, ok := v.(*Result); ok && env.Envelope != nil {
		text += string(env.Envelope.Payload)
	}
	for _, s := range []string{"patient-0001", "Triage", "Discharge", `"note"`, `"records"`, `"screenshot"`} {
		if strings.Contains(text, s) {
			t.Errorf("the result contains %q", s)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx := context.Background()
	id := map[string]string{"patient_id": "patient-0001"}
	// The code names the refusal; its HTTP and gRPC statuses are
	// internal/server's (RewardHTTPStatus).
	code := func(err error) string {
		if rf, ok := refusal.As(err); ok {
			return rf.Code
		}
		return fmt.Sprint(err)
	}
	if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", id); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"register: identity keys differ", func() error {
			_, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0002", map[string]string{"patient_id": "p", "extra": "x"})
			return err
		}, "identity_mismatch"},
		{"register: another subject", func() error {
			_, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0002"})
			return err
		}, "identity_conflict"},
		{"register: same subject re-reads", func() error {
			_, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", id)
			return err
		}, "<nil>"},
		{"score: extra key", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, `, "extra": 1`))
			return err
		}, "invalid_episode"},
		{"score: forbidden metadata key", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, `, "metadata": {"screenshot": "x"}`))
			return err
		}, "invalid_episode"},
		{"score: bad episode id", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("../x", "ckpt-0001", 0, ""))
			return err
		}, "invalid_episode"},
		{"score: wrong digest", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", []byte(`{"episode_id": "episode-0001", "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": "sha256:`+strings.Repeat("a", 64)+`"}`))
			return err
		}, "contract_mismatch"},
		{"score: another subject than registered", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, `, "oracle_identity": {"patient_id": "patient-0002"}`))
			return err
		}, "identity_conflict"},
		{"score: unregistered, no identity", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0009", "ckpt-0001", 0, ""))
			return err
		}, "identity_missing"},
		{"score: unregistered, wrong keys", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0009", "ckpt-0001", 0, `, "oracle_identity": {"visit": "v"}`))
			return err
		}, "identity_mismatch"},
		{"score", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 5, ""))
			return err
		}, "<nil>"},
		{"score again", func() error {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 5, ""))
			return err
		}, "duplicate_episode"},
		{"register a scored episode", func() error {
			_, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", id)
			return err
		}, "duplicate_episode"},
		{"unknown receipt", func() error {
			_, err := r.svc.GetReward(t.Context(), "rwd_"+strings.Repeat("0", 32))
			return err
		}, "not_found"},
	}
	for _, s := range steps {
		if got := code(s.do()); got != s.want {
			t.Errorf("%s: got %s, want %s", s.name, got, s.want)
		}
	}
}

func TestPolicyUpdateMark(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx := context.Background()
	score := func(n int, checkpoint string, update int64) (*Result, error) {
		ep := fmt.Sprintf("episode-%04d", n)
		r.oracle.mu.Lock()
		r.oracle.rows = nil
		r.oracle.mu.Unlock()
		if _, err := r.svc.RegisterEpisode(ctx, "", "", ep, map[string]string{"patient_id": fmt.Sprintf("patient-%04d", n)}); err != nil {
			return nil, err
		}
		r.oracle.add(n, fmt.Sprintf("patient-%04d", n), "Triage")
		return r.svc.ScoreEpisode(ctx, "", r.descriptor(ep, checkpoint, update, ""))
	}
	for i, s := range []struct {
		update    int64
		state     string
		certified bool
	}{{0, CertCurrent, true}, {999, CertCurrent, true}, {1_000_000_000, CertExpired, false}} {
		res, err := score(i+1, "ckpt-0001", s.update)
		if err != nil {
			t.Fatal(err)
		}
		if rc := res.Receipt; rc.CertificateState != s.state || rc.Certified != s.certified || rc.RewardOutcome != OutcomeVerified {
			t.Errorf("update %d: %s certified %v outcome %s", s.update, rc.CertificateState, rc.Certified, rc.RewardOutcome)
		}
	}
	var rf *refusal.Error
	if _, err := score(4, "ckpt-0001", 0); !errors.As(err, &rf) || rf.Code != CodePolicyUpdateRegressed {
		t.Fatalf("update 0 after 10^9: %v, want policy_update_regressed", err)
	}
	// A daemon restart and a renamed checkpoint do not reset the mark.
	r.svc.Store.Close()
	r.open(t)
	if _, err := score(5, "renamed-checkpoint", 0); !errors.As(err, &rf) || rf.Code != CodePolicyUpdateRegressed || !strings.Contains(rf.Message, "ckpt-0001") {
		t.Fatalf("after restart and rename: %v, want policy_update_regressed naming ckpt-0001", err)
	}
	// A refused episode never advanced the mark; an equal update is allowed.
	if _, err := score(6, "renamed-checkpoint", 1_000_000_000); err != nil {
		t.Fatal(err)
	}
}

// Scoring one episode from many goroutines issues exactly one receipt; the
// others are duplicate_episode.
func TestConcurrentScoringIssuesOneReceipt(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx := context.Background()
	if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
		t.Fatal(err)
	}
	r.oracle.add(1, "patient-0001", "Triage")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, dup := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, ""))
			mu.Lock()
			defer mu.Unlock()
			var rf *refusal.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &rf) && rf.Code == CodeDuplicateEpisode:
				dup++
			default:
				t.Errorf("unexpected: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 1 || dup != 7 {
		t.Fatalf("%d receipts and %d duplicates, want 1 and 7", ok, dup)
	}
}

// The digest is over the loaded model with its defaults: writing a default
// out changes nothing, changing an effect changes it (and the corpus).
func TestContractDigest(t *testing.T) {
	t.Parallel()
	load := func(contract, required string) *Contract {
		c, err := LoadContract("m", writeContract(t, contract, required, mockmedForbidden), Trust{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := load(mockmedContract, mockmedRequired)
	explicit := load(strings.Replace(mockmedContract, "scoring: {wrong_effect_reward: 0.0}", "scoring: {wrong_effect_reward: 0, verified_reward: 1.0, refused_reward: 0, uncertain_episodes: unscored}", 1), mockmedRequired)
	if base.Digest != explicit.Digest {
		t.Errorf("defaults written out changed the digest: %s vs %s", base.Digest, explicit.Digest)
	}
	tampered := load(mockmedContract, strings.Replace(mockmedRequired, "expected_count: 1", "expected_count: 2", 1))
	if tampered.Digest == base.Digest || tampered.CorpusDigest == base.CorpusDigest {
		t.Errorf("a changed expected_count kept the digest or the corpus digest")
	}
	if !digestRE.MatchString(base.Digest) || !digestRE.MatchString(base.CorpusDigest) {
		t.Errorf("digests %s %s", base.Digest, base.CorpusDigest)
	}
}

// An episode scored without a registration has no baseline: the change
// claim cannot be judged, so it is unscored, never verified.
func TestUnregisteredEpisodeIsUnscored(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	r.oracle.add(1, "patient-0001", "Triage")
	res, err := r.svc.ScoreEpisode(context.Background(), "", r.descriptor("episode-0001", "ckpt-0001", 0, `, "oracle_identity": {"patient_id": "patient-0001"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rc := res.Receipt; rc.RewardOutcome != OutcomeReconciliationRequired || rc.ScalarReward != nil || rc.BaselineReachable {
		t.Fatalf("outcome %s scalar %v baseline %v; want reconciliation_required, null, false", rc.RewardOutcome, rc.ScalarReward, rc.BaselineReachable)
	}
}

// A certificate calibrated after episodes were scored starts at the
// contract's high-water mark.
func TestCertificateStartsAtTheMark(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx := context.Background()
	if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 5000, "")); err != nil {
		t.Fatal(err)
	}
	out, err := r.svc.Calibrate(ctx, "mockmed", 20, 0.05, nil)
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Payload []byte }
	var cert Certificate
	if err := json.Unmarshal(out.CertificateJSON, &env); err != nil || json.Unmarshal(env.Payload, &cert) != nil {
		t.Fatalf("certificate.json: %v", err)
	}
	if cert.IssuedAtPolicyUpdate != 5000 || cert.State(5999) != CertCurrent || cert.State(6000) != CertExpired {
		t.Fatalf("issued at %d", cert.IssuedAtPolicyUpdate)
	}
}

// The episode is scored through the candidate that read its baseline, and
// only through it: a read reported from another candidate, and an episode
// stored without a pin, are unscored (failed_platform, oracle_unavailable),
// never certified, whatever the other read shows.
func TestPinnedOracle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	r := newRig(t, 1)
	if _, err := r.svc.RegisterEpisode(ctx, "", "", "episode-0001", map[string]string{"patient_id": "patient-0001"}); err != nil {
		t.Fatal(err)
	}
	raw, err := r.svc.Store.RewardGet(ctx, store.RewardEpisodes, "mockmed/episode-0001")
	if err != nil || !strings.Contains(string(raw), `"oracle":{"index":0,"kind":"mem","tier":1,"config_digest":"sha256:mem"}`) {
		t.Fatalf("the stored episode does not pin its oracle: %v %s", err, raw)
	}
	// The other candidate shows the effect; the pinned one read nothing.
	r.oracle.index = 1
	r.oracle.add(10, "patient-0001", "Triage")
	res, err := r.svc.ScoreEpisode(ctx, "", r.descriptor("episode-0001", "ckpt-0001", 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	rc := res.Receipt
	if rc.RewardOutcome != OutcomeFailedPlatform || rc.Uncertainty != UncertaintyOracleUnavailable || rc.ReasonCode != ReasonOracleChanged ||
		rc.ScalarReward != nil || !rc.Unscored || rc.Certified || rc.OracleCandidate == nil || *rc.OracleCandidate != 0 || rc.OracleKind != "mem" {
		t.Fatalf("another candidate's read: %+v", rc)
	}

	// An episode stored before oracles were pinned: readable, unscored.
	r2 := newRig(t, 1)
	old := `{"contract":"mockmed","episode_id":"episode-0002","identity":{"patient_id":"patient-0002"},"baseline_reachable":true,"baseline_records":[],"registered_at":"2026-01-01T00:00:00Z"}`
	if err := r2.svc.Store.RewardUpdate(ctx, func(tx store.RewardTx) error {
		return tx.Put(store.RewardEpisodes, "mockmed/episode-0002", []byte(old))
	}); err != nil {
		t.Fatal(err)
	}
	r2.oracle.add(10, "patient-0002", "Triage")
	res, err = r2.svc.ScoreEpisode(ctx, "", r2.descriptor("episode-0002", "ckpt-0001", 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	rc = res.Receipt
	if rc.RewardOutcome != OutcomeFailedPlatform || rc.Uncertainty != UncertaintyOracleUnavailable || rc.ReasonCode != ReasonOracleNotPinned ||
		rc.ScalarReward != nil || rc.Certified || rc.OracleCandidate != nil || !rc.BaselineReachable {
		t.Fatalf("an unpinned stored episode: %+v", rc)
	}
}

// contract.yaml is read by the strict decoder: an unknown key or a value
// of the wrong type is refused with its path and the fix.
func TestContractFileRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ contract, want string }{
		"unknown key":       {mockmedContract + "identity_key: [x]\n", `identity_key: unknown key; "identity_key" is not one of: schema, id, version, deployment, identity_keys, components, scoring, certificate_policy (did you mean "identity_keys"?)`},
		"nested key":        {strings.Replace(mockmedContract, "epsilon: 0.05", "epsilo: 0.05", 1), `certificate_policy.epsilo: unknown key`},
		"version a number":  {strings.Replace(mockmedContract, `version: "1"`, "version: 1", 1), `version: must be a string, got 1; write it in quotes if it is text`},
		"weight a string":   {strings.Replace(mockmedContract, "weight: 1", "weight: one", 1), "components[0].weight: must be a number, got a string"},
		"policy a list":     {strings.Replace(mockmedContract, "certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}", "certificate_policy: [0.05]", 1), "certificate_policy: must be a map"},
		"policy key null":   {strings.Replace(mockmedContract, "epsilon: 0.05", "epsilon: null", 1), "certificate_policy.epsilon: must be a number"},
		"expiry a fraction": {strings.Replace(mockmedContract, "expiry_policy_updates: 1000", "expiry_policy_updates: 10.5", 1), "certificate_policy.expiry_policy_updates: must be a whole number"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadContract("m", writeContract(t, tc.contract, mockmedRequired, ""), Trust{})
			le, ok := refusal.As(err)
			if !ok || le.Code != RuleInvalid || filepath.Base(le.Path) != ContractFile || !strings.Contains(le.Message, tc.want) {
				t.Fatalf("got %v; want %s in %s saying %q", err, RuleInvalid, ContractFile, tc.want)
			}
		})
	}
}

// A certificate_policy key left out keeps its default; one written
// replaces it.
func TestCertificatePolicyDefaults(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		policy string
		want   CertificatePolicy
	}{
		"one key":   {"{delta: 0.1}", CertificatePolicy{Epsilon: 0.05, Delta: 0.1, Threshold: 0.5, ExpiryPolicyUpdates: 1000}},
		"empty":     {"{}", CertificatePolicy{Epsilon: 0.05, Delta: 0.05, Threshold: 0.5, ExpiryPolicyUpdates: 1000}},
		"every key": {"{epsilon: 0.2, delta: 0.3, threshold: 0.9, expiry_policy_updates: 7}", CertificatePolicy{Epsilon: 0.2, Delta: 0.3, Threshold: 0.9, ExpiryPolicyUpdates: 7}},
	} {
		contract := strings.Replace(mockmedContract, "{epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}", tc.policy, 1)
		c, err := LoadContract("m", writeContract(t, contract, mockmedRequired, ""), Trust{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.CertificatePolicy == nil || *c.CertificatePolicy != tc.want {
			t.Errorf("%s: %+v, want %+v", name, c.CertificatePolicy, tc.want)
		}
	}
	c, err := LoadContract("m", writeContract(t, strings.Replace(mockmedContract, "certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}\n", "", 1), mockmedRequired, ""), Trust{})
	if err != nil || c.CertificatePolicy != nil {
		t.Errorf("no certificate_policy: %+v, %v; want none", c, err)
	}
}

// A descriptor is read by the strict decoder: an unknown key names the
// keys allowed and the nearest, a wrong type its key and the type wanted.
func TestParseDescriptorMessages(t *testing.T) {
	t.Parallel()
	head := `{"episode_id": "episode-0001", "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": "sha256:` + strings.Repeat("a", 64) + `"`
	for name, tc := range map[string]struct{ doc, says string }{
		"typo":        {head + `, "runtime_signl": "refused"}`, `runtime_signl: unknown key; "runtime_signl" is not one of: schema_version, episode_id,`},
		"wrong type":  {head + `, "task_id": 7}`, "task_id: must be a string, got 7"},
		"metadata":    {head + `, "metadata": []}`, "metadata: must be a map, got a list"},
		"id a number": {`{"episode_id": 12345678}`, "episode_id: must be a string"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDescriptor([]byte(tc.doc))
			rf, ok := refusal.As(err)
			if !ok || rf.Code != CodeInvalidEpisode || !strings.Contains(rf.Message, tc.says) {
				t.Fatalf("refusal %v; want invalid_episode saying %q", err, tc.says)
			}
		})
	}
	_, err := ParseDescriptor([]byte(head + `, "runtime_signl": "refused"}`))
	if err == nil || !strings.Contains(err.Error(), `did you mean "runtime_signal"?`) {
		t.Errorf("a misspelt key: %v; want the nearest key named", err)
	}
}

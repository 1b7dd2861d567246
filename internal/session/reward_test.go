package session

import (
	"context"
	"crypto/ed25519"
	stdsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	documentadapter "github.com/verifierd/verifierd/adapters/document"
	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
	sdkrefusal "github.com/verifierd/verifierd/sdk/refusal"
)

// The MockMed reward contract: one new Triage encounter for the registered
// patient, no Discharge; a wrong effect scores 0.
const (
	mockmedContract = `schema: verifierd.reward-contract/v1
id: mockmed-triage
version: "1"
deployment: mockmed
identity_keys: [patient_id]
components: [{name: terminal_effect, weight: 1}]
scoring: {wrong_effect_reward: 0.0}
certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}
`
	mockmedRequired = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  expected_count: 1
  count_new_only: true
  timeout_s: 2
`
	mockmedForbidden = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Discharge}
  expected_count: 1
  timeout_s: 2
`
)

type rewardRig struct {
	svc    *reward.Service
	m      *Manager
	signer *signing.Signer
}

// newRewardRig loads the MockMed contract over deployment (YAML), with a
// certificate calibrated by the daemon key, through RewardOracle.LoadContracts.
func newRewardRig(t *testing.T, deployment string, env map[string]string, adapters ...sdk.Adapter) *rewardRig {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("sql", sqladapter.New)
	for _, a := range adapters {
		host.RegisterInProcess(a.Info().Kind, func() sdk.Adapter { return a })
	}
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	dir := t.TempDir()
	depPath := filepath.Join(dir, "deployment.yaml")
	contractDir := filepath.Join(dir, "mockmed")
	must(t, os.MkdirAll(contractDir, 0o755))
	must(t, os.WriteFile(depPath, []byte(deployment), 0o600))
	for name, text := range map[string]string{reward.ContractFile: mockmedContract, reward.RequiredFile: mockmedRequired, reward.ForbiddenFile: mockmedForbidden} {
		must(t, os.WriteFile(filepath.Join(contractDir, name), []byte(text), 0o600))
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	signer := signing.New(priv)
	daemon := &config.Daemon{Deployments: map[string]string{"mockmed": depPath}, Rewards: map[string]string{"mockmed": contractDir},
		Secrets: config.SecretsConfig{Allow: []string{"MOCKMED_*"}}}
	m := mustNew(t, Options{Host: host, Store: st, Daemon: daemon, Signer: signer, EvidenceKey: make([]byte, EvidenceKeySize),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	// Calibrate with the daemon key, as `verifyctl reward calibrate` does.
	contracts, err := NewRewardOracle(m).LoadContracts()
	if err != nil {
		t.Fatal(err)
	}
	svc := &reward.Service{Contracts: contracts, Oracle: NewRewardOracle(m), Store: st, Signer: signer, EvidenceKey: []byte("evidence")}
	cal, err := svc.Calibrate(t.Context(), "mockmed", 300, 0.05, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(contractDir, reward.CertificateFile), cal.CertificateJSON, 0o600))
	if svc.Contracts, err = NewRewardOracle(m).LoadContracts(); err != nil {
		t.Fatal(err)
	}
	return &rewardRig{svc: svc, m: m, signer: signer}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type episodeCase struct {
	name      string
	patient   string
	rollout   func(t *testing.T, patient string)
	outcome   string
	scalar    *float64
	certified bool
	devOnly   bool
}

func (r *rewardRig) run(t *testing.T, i int, tc episodeCase) {
	t.Helper()
	ctx := context.Background()
	ep := fmt.Sprintf("episode-%04d", i)
	if _, err := r.svc.RegisterEpisode(ctx, "", "", ep, map[string]string{"patient_id": tc.patient}); err != nil {
		t.Fatalf("%s: register: %v", tc.name, err)
	}
	tc.rollout(t, tc.patient)
	desc := fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": %q}`, ep, r.svc.Contracts["mockmed"].Digest)
	res, err := r.svc.ScoreEpisode(ctx, "", []byte(desc))
	if err != nil {
		t.Fatalf("%s: score: %v", tc.name, err)
	}
	rc := res.Receipt
	if rc.RewardOutcome != tc.outcome || rc.Certified != tc.certified || rc.DevelopmentOnly != tc.devOnly {
		t.Errorf("%s: outcome %s (%s) certified %v dev_only %v tier %d; want %s %v %v", tc.name, rc.RewardOutcome, rc.ReasonCode, rc.Certified, rc.DevelopmentOnly, rc.OracleTier, tc.outcome, tc.certified, tc.devOnly)
	}
	switch {
	case tc.scalar == nil && (rc.ScalarReward != nil || !rc.Unscored):
		t.Errorf("%s: scalar %v, want null (unscored)", tc.name, *rc.ScalarReward)
	case tc.scalar != nil && (rc.ScalarReward == nil || *rc.ScalarReward != *tc.scalar):
		t.Errorf("%s: scalar %v, want %v", tc.name, rc.ScalarReward, *tc.scalar)
	}
	if _, err := res.Envelope.Open(r.signer.PublicKey()); err != nil {
		t.Errorf("%s: the envelope does not verify with the daemon key: %v", tc.name, err)
	}
	raw, _ := json.Marshal(res)
	text := string(raw) + string(res.Envelope.Payload)
	for _, secret := range []string{tc.patient, "Triage", "Discharge", "saved"} {
		if strings.Contains(text, secret) {
			t.Errorf("%s: the receipt contains %q", tc.name, secret)
		}
	}
}

func episodeCases(insert func(t *testing.T, patient, typ string), breakStore func(t *testing.T)) []episodeCase {
	one, zero := 1.0, 0.0
	return []episodeCase{
		{"honest", "patient-honest-0001", func(t *testing.T, p string) { insert(t, p, "Triage") }, reward.OutcomeVerified, &one, true, false},
		{"banner lie", "patient-lie-0002", func(*testing.T, string) {}, reward.OutcomeWrongEffect, &zero, true, false},
		{"double submit", "patient-double-0004", func(t *testing.T, p string) { insert(t, p, "Triage"); insert(t, p, "Triage") }, reward.OutcomeWrongEffect, &zero, true, false},
		{"idle with a pre-existing row", "patient-dup-0003", func(*testing.T, string) {}, reward.OutcomeWrongEffect, &zero, true, false},
		{"forbidden discharge", "patient-disc-0005", func(t *testing.T, p string) { insert(t, p, "Triage"); insert(t, p, "Discharge") }, reward.OutcomeWrongEffect, &zero, true, false},
		// Last: the store goes away after the registration.
		{"unreachable store", "patient-gone-0006", func(t *testing.T, _ string) { breakStore(t) }, reward.OutcomeFailedPlatform, nil, false, false},
	}
}

func TestRewardMockMedSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "records.db")
	rw, err := stdsql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT);
		INSERT INTO encounters (patient_id, type, status) VALUES ('patient-dup-0003', 'Triage', 'saved'), ('patient-dup-0003', 'Triage', 'saved')`)
	must(t, err)
	r := newRewardRig(t, fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, status FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
`, db), nil)
	insert := func(t *testing.T, p, typ string) {
		_, err := rw.Exec(`INSERT INTO encounters (patient_id, type, status) VALUES (?, ?, 'saved')`, p, typ)
		must(t, err)
	}
	for i, tc := range episodeCases(insert, func(t *testing.T) { must(t, os.Rename(db, db+".gone")) }) {
		r.run(t, i, tc)
	}
}

func TestRewardMockMedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	t.Parallel()
	parent, err := os.MkdirTemp("", "reward-pg-")
	must(t, err)
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql (scripts/deps.sh)")
	}
	if err != nil {
		t.Fatalf("PostgreSQL could not start: %v", err)
	}
	ctx := context.Background()
	must(t, pg.Exec(ctx, pg.Database, `CREATE TABLE encounters (id BIGSERIAL PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT)`,
		`INSERT INTO encounters (patient_id, type, status) VALUES ('patient-dup-0003', 'Triage', 'saved'), ('patient-dup-0003', 'Triage', 'saved')`))
	r := newRewardRig(t, fmt.Sprintf(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id, type, status FROM encounters WHERE patient_id = %%(patient_id)s ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: MOCKMED_DB_PASSWORD
`, pg.Port, pg.Reader.User, pg.Database), map[string]string{"MOCKMED_DB_PASSWORD": pg.Reader.Password})
	insert := func(t *testing.T, p, typ string) {
		must(t, pg.Exec(ctx, pg.Database, fmt.Sprintf(`INSERT INTO encounters (patient_id, type, status) VALUES ('%s', '%s', 'saved')`, p, typ)))
	}
	for i, tc := range episodeCases(insert, func(t *testing.T) { must(t, pg.Stop()) }) {
		r.run(t, i, tc)
	}
}

// A tier-3 oracle: the onscreen adapter is not on this branch, so an
// in-process adapter declaring tier 3 (reacquired state) stands in for it.
// Its verdict is scored but development only, never certified.
func TestRewardTier3DevelopmentOnly(t *testing.T) {
	t.Parallel()
	tab := &table{}
	screen := &memAdapter{kind: "screen-reward-test", tier: sdk.TierReacquiredState, table: tab}
	r := newRewardRig(t, "effects: {kind: screen-reward-test, newness: whole_read}\n", nil, screen)
	one := 1.0
	r.run(t, 0, episodeCase{"tier 3 honest", "patient-screen-0001", func(_ *testing.T, p string) {
		tab.add(sdk.Record{"id": json.Number("7"), "patient_id": p, "type": "Triage"})
	}, reward.OutcomeVerified, &one, false, true})
	// The banner lie on a screen read that agrees with the banner: verified,
	// and still only development.
	r.run(t, 1, episodeCase{"tier 3 banner lie", "patient-screen-0002", func(_ *testing.T, p string) {
		tab.add(sdk.Record{"id": json.Number("8"), "patient_id": p, "type": "Triage"})
	}, reward.OutcomeVerified, &one, false, true})
}

// A JSON dump renamed records.db is not a SQLite database: the contract is
// refused at load, naming the rule.
func TestRewardRefusesRenamedJSONAsSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "records.db")
	must(t, os.WriteFile(db, []byte(`{"records": []}`), 0o600))
	host, _ := pluginhost.New(pluginhost.Options{})
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "deployment.yaml"), []byte(fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type FROM encounters\n", db)), 0o600))
	cdir := filepath.Join(dir, "c")
	must(t, os.MkdirAll(cdir, 0o755))
	for name, text := range map[string]string{reward.ContractFile: mockmedContract, reward.RequiredFile: mockmedRequired} {
		must(t, os.WriteFile(filepath.Join(cdir, name), []byte(text), 0o600))
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	m := mustNew(t, Options{Host: host, Store: newManager(t).store, Daemon: &config.Daemon{Deployments: map[string]string{"mockmed": filepath.Join(dir, "deployment.yaml")}, Rewards: map[string]string{"m": cdir}}, Signer: signing.New(priv)})
	_, err := NewRewardOracle(m).LoadContracts()
	if err == nil || !strings.Contains(err.Error(), "is not a SQLite database file") || !strings.Contains(err.Error(), "contract.yaml") {
		t.Fatalf("got %v, want the SQLite header refusal naming contract.yaml", err)
	}
}

// A certificate signed by another key loads only when rewards_trust lists
// that key.
func TestRewardsTrust(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "records.db")
	rw, err := stdsql.Open("sqlite", db)
	must(t, err)
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT)`)
	must(t, err)
	rw.Close()
	must(t, os.WriteFile(filepath.Join(dir, "deployment.yaml"), []byte(fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type FROM encounters\n", db)), 0o600))
	cdir := filepath.Join(dir, "c")
	must(t, os.MkdirAll(cdir, 0o755))
	for name, text := range map[string]string{reward.ContractFile: mockmedContract, reward.RequiredFile: mockmedRequired, reward.ForbiddenFile: mockmedForbidden} {
		must(t, os.WriteFile(filepath.Join(cdir, name), []byte(text), 0o600))
	}
	_, issuerKey, _ := ed25519.GenerateKey(nil)
	issuer := signing.New(issuerKey)
	c, err := reward.LoadContract("m", cdir, reward.Trust{})
	must(t, err)
	cal, err := reward.Calibrate(c, 30, 0.05, 1, func(effects []*judge.Contract, before, after reward.OracleRead) reward.Proof {
		return RewardOracle{}.Judge("", nil, effects, before, after)
	})
	must(t, err)
	cert, err := reward.SignCertificate(issuer, reward.NewCertificate(c, cal, issuer.KeyID(), time.Now()))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, reward.CertificateFile), cert, 0o600))

	_, daemonKey, _ := ed25519.GenerateKey(nil)
	m := mustNew(t, Options{Host: newManager(t).host, Store: newManager(t).store, Daemon: &config.Daemon{Deployments: map[string]string{"mockmed": filepath.Join(dir, "deployment.yaml")}, Rewards: map[string]string{"m": cdir}}, Signer: signing.New(daemonKey)})
	// Classified by its code; the text still names the file and the rule.
	_, err = NewRewardOracle(m).LoadContracts()
	if sdkrefusal.CodeOf(err) != reward.RuleCertificateUntrust || !strings.Contains(err.Error(), reward.CertificateFile+": "+reward.RuleCertificateUntrust+": ") {
		t.Fatalf("an issuer outside rewards_trust: %v, want code %s and a message naming the file and the rule", err, reward.RuleCertificateUntrust)
	}
	m.daemon.RewardsTrust = []string{issuer.PublicKeyBase64()}
	got, err := NewRewardOracle(m).LoadContracts()
	if err != nil || got["m"].Certificate == nil {
		t.Fatalf("an issuer in rewards_trust: %v", err)
	}
}

// restart gives the reward service a fresh adapter host over the same
// store and daemon config, as a daemon restart would: every candidate is
// configured again at the next read.
func (r *rewardRig) restart(t *testing.T, kinds map[string]func() sdk.Adapter) {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	for kind, f := range kinds {
		host.RegisterInProcess(kind, f)
	}
	m := mustNew(t, Options{Host: host, Store: r.m.store, Daemon: r.m.daemon, Signer: r.m.signer, EvidenceKey: r.m.keys.key(), LookupEnv: r.m.lookupEnv})
	r.m = m
	r.svc.Oracle = NewRewardOracle(m)
}

func (r *rewardRig) score(t *testing.T, ep string) receipt.RewardReceiptPayload {
	t.Helper()
	desc := fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": %q}`, ep, r.svc.Contracts["mockmed"].Digest)
	res, err := r.svc.ScoreEpisode(context.Background(), "", []byte(desc))
	if err != nil {
		t.Fatalf("%s: score: %v", ep, err)
	}
	return res.Receipt
}

func (r *rewardRig) register(t *testing.T, ep, patient string) {
	t.Helper()
	if _, err := r.svc.RegisterEpisode(context.Background(), "", "", ep, map[string]string{"patient_id": patient}); err != nil {
		t.Fatalf("%s: register: %v", ep, err)
	}
}

// A two-candidate oracle, SQLite first and a document folder second, whose
// folder holds a matching record for every subject. The episode is read
// through the candidate that read its baseline: when that candidate is
// reconfigured, or cannot be configured after a restart (its database file
// is gone), the episode is unscored and never read through the folder —
// which would show an idle rollout's "new" record against the SQLite
// baseline and answer verified.
func TestRewardOraclePinned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "records.db")
	rw, err := stdsql.Open("sqlite", db)
	must(t, err)
	defer rw.Close()
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT)`)
	must(t, err)
	folder := filepath.Join(dir, "exports")
	must(t, os.MkdirAll(folder, 0o755))
	for i, p := range []string{"patient-pin-0001", "patient-pin-0002", "patient-pin-0003"} {
		must(t, os.WriteFile(filepath.Join(folder, fmt.Sprintf("encounter-%d.json", i)), []byte(fmt.Sprintf(`{"patient_id": %q, "type": "Triage"}`, p)), 0o600))
	}
	sqlSection := fmt.Sprintf(`    - kind: sql
      sqlite_database: %s
      sql_query: SELECT id, patient_id, type, status FROM encounters WHERE patient_id = :patient_id ORDER BY id
      sql_query_params: {patient_id: {param: patient_id}}
      census: {sql_query: SELECT id FROM encounters}
`, db)
	docSection := fmt.Sprintf(`    - kind: document
      root: %s
      file_pattern: "*.json"
      document_format: json
`, folder)
	deployment := "effects:\n  candidates:\n" + sqlSection + docSection
	kinds := map[string]func() sdk.Adapter{"sql": sqladapter.New, "document": documentadapter.New}
	r := newRewardRig(t, deployment, nil, documentadapter.New())

	// Honest, through SQLite: verified and certified.
	r.register(t, "episode-0001", "patient-pin-0001")
	raw, err := r.m.store.RewardGet(t.Context(), store.RewardEpisodes, "mockmed/episode-0001")
	if err != nil || !strings.Contains(string(raw), `"oracle":{"index":0,"kind":"sql","tier":1,"config_digest":"sha256:`) {
		t.Fatalf("the stored episode does not pin the SQLite candidate: %v %s", err, raw)
	}
	_, err = rw.Exec(`INSERT INTO encounters (patient_id, type, status) VALUES ('patient-pin-0001', 'Triage', 'saved')`)
	must(t, err)
	if rc := r.score(t, "episode-0001"); rc.RewardOutcome != reward.OutcomeVerified || !rc.Certified || rc.DevelopmentOnly || rc.OracleKind != "sql" ||
		rc.OracleCandidate == nil || *rc.OracleCandidate != 0 || !strings.HasPrefix(rc.OracleConfigDigest, "hmac-sha256:") {
		t.Fatalf("honest: %+v", rc)
	}

	// Reconfigured between registration and scoring: unscored.
	r.register(t, "episode-0002", "patient-pin-0002")
	depPath := r.m.daemon.Deployments["mockmed"]
	must(t, os.WriteFile(depPath, []byte(strings.Replace(deployment, "ORDER BY id", "ORDER BY id DESC", 1)), 0o600))
	rc := r.score(t, "episode-0002")
	if rc.RewardOutcome != reward.OutcomeFailedPlatform || rc.Uncertainty != reward.UncertaintyOracleUnavailable || rc.ReasonCode != reward.ReasonOracleChanged ||
		rc.ScalarReward != nil || !rc.Unscored || rc.Certified {
		t.Fatalf("reconfigured oracle: %+v", rc)
	}
	// The candidates swapped: the folder now stands where SQLite stood.
	r.register(t, "episode-0004", "patient-pin-0002")
	must(t, os.WriteFile(depPath, []byte("effects:\n  candidates:\n"+docSection+sqlSection), 0o600))
	if rc := r.score(t, "episode-0004"); rc.ReasonCode != reward.ReasonOracleChanged || rc.ScalarReward != nil || rc.Certified || rc.OracleKind != "sql" {
		t.Fatalf("swapped candidates: %+v", rc)
	}
	// The SQLite candidate removed, the folder alone.
	must(t, os.WriteFile(depPath, []byte(deployment), 0o600))
	r.register(t, "episode-0005", "patient-pin-0002")
	must(t, os.WriteFile(depPath, []byte("effects:\n  candidates:\n"+docSection), 0o600))
	if rc := r.score(t, "episode-0005"); rc.ReasonCode != reward.ReasonOracleChanged || rc.ScalarReward != nil || rc.Certified {
		t.Fatalf("removed candidate: %+v", rc)
	}
	must(t, os.WriteFile(depPath, []byte(deployment), 0o600))

	// The database file is gone and the daemon restarts: the SQLite
	// candidate cannot be configured, the folder still can. Idle rollout.
	r.register(t, "episode-0003", "patient-pin-0003")
	must(t, os.Rename(db, db+".gone"))
	r.restart(t, kinds)
	rc = r.score(t, "episode-0003")
	if rc.RewardOutcome != reward.OutcomeFailedPlatform || rc.Uncertainty != reward.UncertaintyOracleUnavailable || rc.ReasonCode != reward.ReasonOracleUnavailable ||
		rc.ScalarReward != nil || !rc.Unscored || rc.Certified || rc.OracleKind != "sql" || rc.OracleCandidate == nil || *rc.OracleCandidate != 0 {
		t.Fatalf("pinned candidate unavailable: %+v", rc)
	}
}

// A document folder as the oracle: it declares tier 1, but whoever writes
// the file writes the answer. Scored, development only, never certified.
func TestRewardDocumentOracleDevelopmentOnly(t *testing.T) {
	t.Parallel()
	folder := t.TempDir()
	r := newRewardRig(t, fmt.Sprintf("effects:\n  kind: document\n  root: %s\n  file_pattern: \"*.json\"\n  document_format: json\n", folder), nil, documentadapter.New())
	one := 1.0
	r.run(t, 0, episodeCase{"document honest", "patient-doc-0001", func(t *testing.T, p string) {
		must(t, os.WriteFile(filepath.Join(folder, "encounter.json"), []byte(fmt.Sprintf(`{"patient_id": %q, "type": "Triage"}`, p)), 0o600))
	}, reward.OutcomeVerified, &one, false, true})
}

// An oracle whose records echo the read credential: the stored baseline
// holds the secret's placeholder, never its value; scoring restores it
// before judging, so the honest episode is verified and certified and the
// idle one is not; no receipt carries it.
func TestRewardSecretInRecords(t *testing.T) {
	t.Parallel()
	const token = "mm-token-8c1d55e0a9"
	tab := &table{}
	tab.add(sdk.Record{"id": json.Number("1"), "patient_id": "patient-old", "type": "Triage", "auth": "Bearer " + token})
	a := &memAdapter{kind: "echo-reward-test", tier: sdk.TierIndependentSystem, table: tab}
	r := newRewardRig(t, "effects:\n  kind: echo-reward-test\n  newness: whole_read\n  secret_env: {token: MOCKMED_TOKEN}\n", map[string]string{"MOCKMED_TOKEN": token}, a)
	one, zero := 1.0, 0.0
	r.run(t, 0, episodeCase{"honest", "patient-echo-0001", func(_ *testing.T, p string) {
		tab.add(sdk.Record{"id": json.Number("2"), "patient_id": p, "type": "Triage", "auth": "Bearer " + token})
	}, reward.OutcomeVerified, &one, true, false})
	r.run(t, 1, episodeCase{"idle", "patient-echo-0002", func(*testing.T, string) {}, reward.OutcomeWrongEffect, &zero, true, false})
	for _, ep := range []string{"episode-0000", "episode-0001"} {
		raw, err := r.m.store.RewardGet(t.Context(), store.RewardEpisodes, "mockmed/"+ep)
		if err != nil || raw == nil || strings.Contains(string(raw), token) || !strings.Contains(string(raw), "[redacted:secret_env.token]") {
			t.Errorf("stored %s: %s %v", ep, raw, err)
		}
	}
}

// TestRewardOracleParts: the oracle is made of its parts, without a
// Manager: with no daemon config it loads no contract and knows no
// deployment, and a read of an unknown deployment is unreachable with its
// reason withheld (it cannot be masked).
func TestRewardOracleParts(t *testing.T) {
	t.Parallel()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	none := func(string) (string, bool) { return "", false }
	o := newRewardOracle(nil, nil, newConfigurer(host, none, nil), none, afterReader{keys: newEvidenceKeys(nil)})
	if got, err := o.LoadContracts(); err != nil || len(got) != 0 {
		t.Fatalf("LoadContracts without a daemon config: %v %v, want none", got, err)
	}
	if err := o.CheckDeployment("mockmed"); err == nil || !strings.Contains(err.Error(), `no deployment named "mockmed"`) {
		t.Fatalf("CheckDeployment of an unregistered name: %v", err)
	}
	read := o.Read(t.Context(), "mockmed", nil, map[string]string{"patient_id": "p1"}, "before", nil)
	if read.Snapshot.Reachable || read.Pin != nil || !strings.Contains(read.Snapshot.Reason, "the reason is withheld") {
		t.Fatalf("read of an unregistered deployment: %+v", read)
	}
}

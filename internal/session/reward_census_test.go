package session

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	sdkrefusal "github.com/verifierd/verifierd/sdk/refusal"
)

// rewardClinic is a real SQLite clinic: encounter 1 is another patient's
// Triage. newness is the candidate's newness lines (a census, a newness:
// declaration, or none).
func rewardClinic(t *testing.T, newness string) (*rewardRig, *stdsql.DB) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "clinic.db")
	rw, err := stdsql.Open("sqlite", db)
	must(t, err)
	t.Cleanup(func() { rw.Close() })
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT);
		INSERT INTO encounters (id, patient_id, type, status) VALUES (1, 'patient-other-0001', 'Triage', 'saved')`)
	must(t, err)
	return newRewardRig(t, fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, status FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
%s`, db, newness), nil), rw
}

const (
	censusLines = "  census: {sql_query: SELECT id FROM encounters}\n"
	repoint     = `UPDATE encounters SET patient_id = ? WHERE id = 1`
	honest      = `INSERT INTO encounters (patient_id, type, status) VALUES (?, 'Triage', 'saved')`
)

// reasonsOf are every reason code of a receipt's verdicts.
func reasonsOf(rc receipt.RewardReceiptPayload) []string {
	var out []string
	for _, v := range rc.Verdicts {
		out = append(out, v.Reasons...)
	}
	return out
}

// TestRewardCensusRepointing: on a deployment with a census, a policy that
// re-points another patient's existing Triage to the graded patient scores
// wrong_effect (0), with EXISTING_RECORD_CHANGED, as Begin/Verify judge
// the same change; the receipt records newness census. The same
// re-pointing on the same read without a census (newness: newly_matching,
// the declared risk) scores verified: the census is what refutes it.
func TestRewardCensusRepointing(t *testing.T) {
	t.Parallel()
	r, rw := rewardClinic(t, censusLines)
	r.register(t, "episode-repoint-01", "patient-graded-0001")
	_, err := rw.Exec(repoint, "patient-graded-0001")
	must(t, err)
	rc := r.score(t, "episode-repoint-01")
	// Not verified: the receipt certifies a 0, never a 1.0.
	if rc.RewardOutcome != reward.OutcomeWrongEffect || rc.ReasonCode != judge.ReasonExistingRecordChanged ||
		rc.ScalarReward == nil || *rc.ScalarReward != 0 || !slices.Contains(reasonsOf(rc), judge.ReasonExistingRecordChanged) {
		t.Fatalf("re-pointed with a census: %s (%s) scalar %v reasons %v, want wrong_effect 0 with %s", rc.RewardOutcome, rc.ReasonCode, rc.ScalarReward, reasonsOf(rc), judge.ReasonExistingRecordChanged)
	}
	if rc.Newness != config.NewnessCensus {
		t.Errorf("receipt newness %q, want %q", rc.Newness, config.NewnessCensus)
	}
	// An honest new Triage on the same deployment still verifies.
	r.register(t, "episode-honest-01", "patient-graded-0002")
	_, err = rw.Exec(honest, "patient-graded-0002")
	must(t, err)
	if rc := r.score(t, "episode-honest-01"); rc.RewardOutcome != reward.OutcomeVerified || !rc.Certified {
		t.Fatalf("honest with a census: %s (%s) certified %v reasons %v", rc.RewardOutcome, rc.ReasonCode, rc.Certified, reasonsOf(rc))
	}

	// The control: without a census the narrowed read cannot tell.
	plain, rw2 := rewardClinic(t, "  newness: newly_matching\n")
	plain.register(t, "episode-repoint-02", "patient-graded-0001")
	_, err = rw2.Exec(repoint, "patient-graded-0001")
	must(t, err)
	if rc := plain.score(t, "episode-repoint-02"); rc.RewardOutcome != reward.OutcomeVerified || rc.Newness != config.NewnessNewlyMatching {
		t.Fatalf("re-pointed without a census: %s newness %q, want verified newly_matching (the control)", rc.RewardOutcome, rc.Newness)
	}
}

// TestRewardCensusHonestPlusRepointed: an honest new Triage and a
// re-pointed one. The census proves one record new; the changed existing
// record still refutes the episode.
func TestRewardCensusHonestPlusRepointed(t *testing.T) {
	t.Parallel()
	r, rw := rewardClinic(t, censusLines)
	r.register(t, "episode-both-0001", "patient-graded-0001")
	_, err := rw.Exec(honest, "patient-graded-0001")
	must(t, err)
	_, err = rw.Exec(repoint, "patient-graded-0001")
	must(t, err)
	rc := r.score(t, "episode-both-0001")
	if rc.RewardOutcome != reward.OutcomeWrongEffect || rc.ScalarReward == nil || *rc.ScalarReward != 0 || !slices.Contains(reasonsOf(rc), judge.ReasonExistingRecordChanged) {
		t.Fatalf("honest and re-pointed with a census: %s (%s) certified %v reasons %v, want not verified with %s", rc.RewardOutcome, rc.ReasonCode, rc.Certified, reasonsOf(rc), judge.ReasonExistingRecordChanged)
	}
}

// TestRewardNewnessRefusedAtRegistration: a registration whose oracle
// reads a narrowed collection with neither a census nor a newness:
// declaration is refused (newness_unproven), naming the fix; nothing is
// stored, so scoring the episode finds it unregistered.
func TestRewardNewnessRefusedAtRegistration(t *testing.T) {
	t.Parallel()
	r, _ := rewardClinic(t, "")
	_, err := r.svc.RegisterEpisode(context.Background(), "", "", "episode-narrow-01", map[string]string{"patient_id": "patient-graded-0001"})
	re, ok := errors.AsType[*sdkrefusal.Error](err)
	if !ok || re.Code != reward.CodeNewnessUnproven {
		t.Fatalf("register over a narrowed read without a census: %v, want a %s refusal", err, reward.CodeNewnessUnproven)
	}
	for _, want := range []string{"census:", "newness: whole_read", "newness: newly_matching", "require_proven_newness", "deployment.effects (sql)"} {
		if !strings.Contains(re.Message, want) {
			t.Errorf("the refusal does not name %q: %s", want, re.Message)
		}
	}
	raw, err := r.m.store.RewardGet(t.Context(), store.RewardEpisodes, "mockmed/episode-narrow-01")
	if err != nil || raw != nil {
		t.Errorf("a refused registration stored %s (%v)", raw, err)
	}
}

// TestRewardFreshness: the candidate's freshness window applies at
// scoring, as at Verify. A Triage written with a timestamp from 2001 is
// INDETERMINATE (STALE): reconciliation_required, unscored, never
// certified; one written now verifies.
func TestRewardFreshness(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "clinic.db")
	rw, err := stdsql.Open("sqlite", db)
	must(t, err)
	t.Cleanup(func() { rw.Close() })
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT, created_at TEXT)`)
	must(t, err)
	r := newRewardRig(t, fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, status, created_at FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
  freshness_field: created_at
  freshness_window_s: 86400
`, db), nil)
	write := func(patient, at string) {
		t.Helper()
		_, err := rw.Exec(`INSERT INTO encounters (patient_id, type, status, created_at) VALUES (?, 'Triage', 'saved', ?)`, patient, at)
		must(t, err)
	}
	r.register(t, "episode-stale-0001", "patient-stale-0001")
	write("patient-stale-0001", "2001-01-01T00:00:00Z")
	rc := r.score(t, "episode-stale-0001")
	if rc.RewardOutcome != reward.OutcomeReconciliationRequired || rc.ReasonCode != judge.ReasonStale || rc.ScalarReward != nil || !rc.Unscored || rc.Certified {
		t.Fatalf("stale Triage: %s (%s) scalar %v certified %v, want reconciliation_required (STALE), unscored", rc.RewardOutcome, rc.ReasonCode, rc.ScalarReward, rc.Certified)
	}
	r.register(t, "episode-fresh-0001", "patient-fresh-0001")
	write("patient-fresh-0001", time.Now().UTC().Format(time.RFC3339))
	if rc := r.score(t, "episode-fresh-0001"); rc.RewardOutcome != reward.OutcomeVerified || !rc.Certified {
		t.Fatalf("fresh Triage: %s (%s) reasons %v", rc.RewardOutcome, rc.ReasonCode, reasonsOf(rc))
	}
}

// TestRewardRefusedWhileFirstCandidateDown: a registration while the
// deployment's first candidate cannot be configured is refused
// (oracle_unavailable, naming both candidates), where before it quietly
// pinned the next candidate for the episode's life; nothing is stored.
// Once the first candidate is back, the same episode registers.
func TestRewardRefusedWhileFirstCandidateDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := filepath.Join(dir, "first", "clinic.db")
	second := filepath.Join(dir, "clinic.db")
	must(t, os.MkdirAll(filepath.Dir(first), 0o755))
	for _, db := range []string{first, second} {
		rw, err := stdsql.Open("sqlite", db)
		must(t, err)
		_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT, created_at TEXT)`)
		must(t, err)
		rw.Close()
	}
	cand := func(db string) string {
		return fmt.Sprintf(`
    - kind: sql
      sqlite_database: %s
      sql_query: SELECT id, patient_id, type, status, created_at FROM encounters WHERE patient_id = :patient_id ORDER BY id
      sql_query_params: {patient_id: {param: patient_id}}
      census: {sql_query: SELECT id FROM encounters}`, db)
	}
	r := newRewardRig(t, "effects:\n  candidates:"+cand(first)+cand(second)+"\n", nil)
	// The first candidate's database goes away: it cannot be configured.
	must(t, os.Rename(filepath.Dir(first), filepath.Dir(first)+".away"))
	_, err := r.svc.RegisterEpisode(context.Background(), "", "", "episode-down-0001", map[string]string{"patient_id": "patient-down-0001"})
	re, ok := errors.AsType[*sdkrefusal.Error](err)
	if !ok || re.Code != reward.CodeOracleUnavailable {
		t.Fatalf("register while the first candidate is down: %v, want a %s refusal", err, reward.CodeOracleUnavailable)
	}
	for _, want := range []string{"candidate 0 (sql)", "would pin candidate 1 (sql)", "register the episode again"} {
		if !strings.Contains(re.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, re.Message)
		}
	}
	if raw, err := r.m.store.RewardGet(t.Context(), store.RewardEpisodes, "mockmed/episode-down-0001"); err != nil || raw != nil {
		t.Errorf("a refused registration stored %s (%v)", raw, err)
	}
	must(t, os.Rename(filepath.Dir(first)+".away", filepath.Dir(first)))
	r.register(t, "episode-down-0001", "patient-down-0001")
}

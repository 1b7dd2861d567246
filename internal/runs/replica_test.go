package runs

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/store/pg"
	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// replica is one daemon's session.Manager over a shared store and the shared
// in-memory system of record, with the keys every replica shares.
func replica(t *testing.T, st store.Backend, tab *table, priv ed25519.PrivateKey, evidence []byte, deps map[string]string, wf *workflow.Workflow) *session.Manager {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &memAdapter{kind: "runrep", tier: 1, table: tab}
	host.RegisterInProcess("runrep", func() sdk.Adapter { return a })
	t.Cleanup(func() { host.Close() })
	if _, err := st.Bind(t.Context(), store.IntegrityKey(evidence), store.Keys{EvidenceKeyID: store.EvidenceKeyID(evidence), SigningKeyID: signing.New(priv).KeyID()}, false); err != nil {
		t.Fatal(err)
	}
	return mustNew(t, session.Options{Host: host, Store: st, Daemon: &config.Daemon{Deployments: deps}, Signer: signing.New(priv), EvidenceKey: evidence,
		Workflows: map[string]*workflow.Workflow{"clinic": wf}})
}

// runAcross begins the run on one daemon and again, with the same id, on
// another: the stored run answers both.
func runAcross(t *testing.T, ms ...*session.Manager) {
	t.Helper()
	ctx := t.Context()
	if _, err := For(ms[0]).BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Ada"}, RunID: "rep"}); err != nil {
		t.Fatal(err)
	}
	// The same id on another daemon: the stored run answers.
	if id, err := For(ms[1]).BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Ada"}, RunID: "rep"}); err != nil || id != "rep" {
		t.Fatalf("BeginRun on another daemon: %q %v", id, err)
	}
}

func shared2Steps(t *testing.T) *workflow.Workflow {
	t.Helper()
	head, _, _ := strings.Cut(runWorkflowYAML, "  - step: mail")
	w, err := workflow.Parse([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// stepsAcross: intake on the first daemon, posting (its handoff read from
// the store) begun on the second and verified on the third, the run
// finished on the first: VERIFIED, and the same seal seen everywhere.
func stepsAcross(t *testing.T, tab *table, ms []*session.Manager) {
	t.Helper()
	ctx := t.Context()
	runAcross(t, ms...)
	b, err := ms[0].Begin(ctx, session.BeginRequest{RunID: "rep", Step: "intake"})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": "p-7", "kind": "patient", "name": "Ada"})
	if v, err := ms[1].Verify(ctx, b.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("intake verified on another daemon: %v %v", v, err)
	}
	b, err = ms[1].Begin(ctx, session.BeginRequest{RunID: "rep", Step: "posting", Params: map[string]string{"amount": "2"}})
	if err != nil {
		t.Fatalf("posting begun on another daemon: %v", err)
	}
	tab.add(sdk.Record{"id": "t-7", "kind": "posting", "patient_id": "p-7", "amount": "2"})
	if v, err := ms[2].Verify(ctx, b.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("posting verified on a third daemon: %v %v", v, err)
	}
	view, err := For(ms[2]).FinishRun(ctx, "rep")
	if err != nil || view.Outcome != run.Verified || view.Attempt != 1 {
		t.Fatalf("FinishRun: %+v %v", view, err)
	}
	for i, m := range ms {
		got, err := For(m).GetRun(ctx, "rep")
		if err != nil || got.Outcome != run.Verified || string(got.Receipt) != string(view.Receipt) {
			t.Fatalf("daemon %d sees %+v %v", i, got, err)
		}
		if again, err := For(m).FinishRun(ctx, "rep"); err != nil || again.Attempt != 1 {
			t.Fatalf("FinishRun again on daemon %d: attempt %d %v", i, again.Attempt, err)
		}
	}
}

// TestRunSurvivesRestart: a daemon stopped between steps, and between
// Verify and FinishRun, loses nothing of the run (the embedded store).
func TestRunSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tab := &table{}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	evidence := make([]byte, session.EvidenceKeySize)
	deps := map[string]string{"clinic": writeDeployment(t, "effects: {kind: runrep, newness: whole_read}\n")}
	wf := shared2Steps(t)
	var prev store.Backend
	open := func() *session.Manager {
		if prev != nil {
			prev.Close() // the daemon stops; its memory is gone
		}
		st, err := bolt.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		prev = st
		t.Cleanup(func() { st.Close() })
		return replica(t, st, tab, priv, evidence, deps, wf)
	}
	stepsAcrossRestarts(t, tab, &restarts{open: open})
}

// restarts opens a fresh daemon each time at is asked for another one: the
// embedded store is one daemon's at a time, and the one before is gone
// with its memory.
type restarts struct {
	open func() *session.Manager
	cur  *session.Manager
	idx  int
}

func (l *restarts) at(i int) *session.Manager {
	if l.cur == nil || l.idx != i {
		l.cur, l.idx = l.open(), i
	}
	return l.cur
}

func stepsAcrossRestarts(t *testing.T, tab *table, l *restarts) {
	t.Helper()
	ctx := t.Context()
	if _, err := For(l.at(0)).BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Ada"}, RunID: "rep"}); err != nil {
		t.Fatal(err)
	}
	b, err := l.at(0).Begin(ctx, session.BeginRequest{RunID: "rep", Step: "intake"})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": "p-7", "kind": "patient", "name": "Ada"})
	if v, err := l.at(1).Verify(ctx, b.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("intake after a restart: %v %v", v, err)
	}
	// Restarted between two steps.
	b, err = l.at(2).Begin(ctx, session.BeginRequest{RunID: "rep", Step: "posting", Params: map[string]string{"amount": "2"}})
	if err != nil {
		t.Fatalf("posting after a restart: %v", err)
	}
	tab.add(sdk.Record{"id": "t-7", "kind": "posting", "patient_id": "p-7", "amount": "2"})
	if v, err := l.at(2).Verify(ctx, b.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("posting: %v %v", v, err)
	}
	// Restarted between Verify and FinishRun.
	view, err := For(l.at(3)).FinishRun(ctx, "rep")
	if err != nil || view.Outcome != run.Verified || view.Attempt != 1 {
		t.Fatalf("FinishRun after a restart: %+v %v", view, err)
	}
	got, err := For(l.at(4)).GetRun(ctx, "rep")
	if err != nil || got.Outcome != run.Verified || string(got.Receipt) != string(view.Receipt) {
		t.Fatalf("GetRun after a restart: %+v %v", got, err)
	}
}

// TestRunAcrossPostgresReplicas: two replicas share a PostgreSQL store;
// the run begun on one is continued and finished on the other.
func TestRunAcrossPostgresReplicas(t *testing.T) {
	dir, err := os.MkdirTemp("", "runs-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	srv, err := sqlservers.StartPostgres(dir)
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		t.Fatalf("PostgreSQL could not start: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("RUNS_PG_TEST_PASSWORD", srv.Admin.Password)
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", srv.Admin.User, srv.Port, srv.Database)
	tab := &table{}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	evidence := make([]byte, session.EvidenceKeySize)
	deps := map[string]string{"clinic": writeDeployment(t, "effects: {kind: runrep, newness: whole_read}\n")}
	wf := shared2Steps(t)
	var ms []*session.Manager
	for range 3 {
		st, err := pg.Open(t.Context(), dsn, pg.Options{PasswordEnv: "RUNS_PG_TEST_PASSWORD"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ms = append(ms, replica(t, st, tab, priv, evidence, deps, wf))
	}
	stepsAcross(t, tab, ms)
}

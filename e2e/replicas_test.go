package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// storePasswordEnv names the variable the daemons read the store password
// from (--store-password-env).
const storePasswordEnv = "VERIFIERD_STORE_PASSWORD"

// storeDatabase starts a PostgreSQL server for a daemon store and returns
// the DSN of its database (without the password) and the daemon
// environment holding the password.
func storeDatabase(t *testing.T) (string, []string) {
	t.Helper()
	dsn, env, _ := storeServer(t)
	return dsn, env
}

// storeServer is storeDatabase with the server.
func storeServer(t testing.TB) (string, []string, *sqlservers.Postgres) {
	t.Helper()
	parent, err := os.MkdirTemp("", "e2e-store-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		log := ""
		if pg != nil {
			log = pg.Log()
		}
		t.Fatalf("PostgreSQL could not start: %v\n%s", err, log)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pg.Admin.User, pg.Port, pg.Database),
		[]string{storePasswordEnv + "=" + pg.Admin.Password}, pg
}

// replicas starts n daemons on one PostgreSQL store, sharing one signing
// key and one evidence key, each with its own data dir. The first reads the
// evidence key from a file (--evidence-key) and creates its signing key;
// the others get both keys through environment variables
// (--signing-key-env, --evidence-key-env), as a Kubernetes Secret passes
// them.
func replicas(t *testing.T, n int, c *clinicDB, extra ...string) []*daemon {
	t.Helper()
	return replicasWith(t, n, daemonOpts{config: namedClinic(t, c, "")}, extra...)
}

// replicasWith is replicas with each daemon's config, plugin folder,
// inline switch and further environment taken from o.
func replicasWith(t *testing.T, n int, o daemonOpts, extra ...string) []*daemon {
	t.Helper()
	dsn, env := storeDatabase(t)
	env = append(env, o.env...)
	keys := t.TempDir()
	evidence := filepath.Join(keys, "evidence.key")
	evidenceKey := make([]byte, 32)
	if _, err := rand.Read(evidenceKey); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evidence, evidenceKey, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--store", dsn, "--store-password-env", storePasswordEnv}, extra...)
	first := startDaemon(t, daemonOpts{config: o.config, pluginDir: o.pluginDir, inline: o.inline, env: env, args: append(args, "--evidence-key", evidence)})
	ds := []*daemon{first}
	pemKey, err := os.ReadFile(filepath.Join(first.dataDir, "keys", "receipt-signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemKey)
	if block == nil {
		t.Fatal("the signing key file is not PEM")
	}
	keyEnv := append(slices.Clone(env),
		"VERIFIERD_SIGNING_KEY="+base64.StdEncoding.EncodeToString(block.Bytes),
		"VERIFIERD_EVIDENCE_KEY="+base64.StdEncoding.EncodeToString(evidenceKey))
	for range n - 1 {
		ds = append(ds, startDaemon(t, daemonOpts{config: o.config, pluginDir: o.pluginDir, inline: o.inline, env: keyEnv,
			args: append(slices.Clone(args), "--signing-key-env", "VERIFIERD_SIGNING_KEY", "--evidence-key-env", "VERIFIERD_EVIDENCE_KEY")}))
	}
	_, firstID := first.keyFile(t)
	for _, d := range ds {
		if strings.Contains(d.logs(), env[0][len(storePasswordEnv)+1:]) {
			t.Fatal("the store password is in the daemon log")
		}
		if _, id := d.keyFile(t); id != firstID {
			t.Fatalf("replica signs with key %s, the first with %s", id, firstID)
		}
	}
	return ds
}

// TestReplicasKillBetweenBeginAndVerify: a session begun on replica A is
// verified on replica B after A was killed with kill -9, with the verdict
// that needs A's baseline.
func TestReplicasKillBetweenBeginAndVerify(t *testing.T) {
	c := newClinic(t)
	ds := replicas(t, 2, c)
	a, b := ds[0], ds[1]
	c.save(t, "p1", "earlier visit", 1) // a pre-existing row the baseline must remember
	s := a.beginNamed(t, c, "clinic", "p1", "Follow-up")
	a.kill9()
	c.save(t, "p1", "Follow-up", 1)
	v := b.verify(t, s.SessionID)
	want := "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_AMBIGUOUS"
	if got := v.summary(); got != want {
		t.Errorf("verify on B after kill -9 of A = %s\nwant %s", got, want)
	}
	// A clean write on a second patient: begun on B, A back, verified on A.
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	s2 := b.beginNamed(t, c, "clinic", "p2", "Follow-up")
	c.save(t, "p2", "Follow-up", 1)
	if got := a.verify(t, s2.SessionID).summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("begun on B, verified on A = %s", got)
	}
}

// TestReplicasConcurrentVerify: Verify for one session sent to A and B at
// once stores one result, which both return (the same receipt), and the
// shared ledger holds one chain with one verification entry per session;
// the receipts check against it.
func TestReplicasConcurrentVerify(t *testing.T) {
	c := newClinic(t)
	ds := replicas(t, 2, c)
	a, b := ds[0], ds[1]
	const sessions = 4
	var rcpts []string
	dir := t.TempDir()
	for i := range sessions {
		patient := fmt.Sprintf("p%d", i)
		s := ds[i%2].beginNamed(t, c, "clinic", patient, "Follow-up")
		c.save(t, patient, "Follow-up", 1)
		outs := make([]string, 2)
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for j, d := range []*daemon{a, b} {
			wg.Go(func() {
				outs[j], codes[j] = d.ctl(t, "verify", "--session", s.SessionID, "--receipt-out", filepath.Join(dir, fmt.Sprintf("r%d-%d.json", i, j)))
			})
		}
		wg.Wait()
		var got [2]struct {
			Outcome string          `json:"outcome"`
			Receipt json.RawMessage `json:"receipt"`
		}
		for j := range 2 {
			if codes[j] != 0 {
				t.Fatalf("session %d verify on replica %d: exit %d %s", i, j, codes[j], outs[j])
			}
			if err := json.Unmarshal([]byte(outs[j]), &got[j]); err != nil {
				t.Fatal(err)
			}
		}
		if got[0].Outcome != "VERIFIED" || got[1].Outcome != "VERIFIED" {
			t.Fatalf("session %d: outcomes %s / %s", i, got[0].Outcome, got[1].Outcome)
		}
		if !bytes.Equal(compact(t, got[0].Receipt), compact(t, got[1].Receipt)) {
			t.Fatalf("session %d: A and B returned different receipts (two stored results)", i)
		}
		rcpts = append(rcpts, filepath.Join(dir, fmt.Sprintf("r%d-0.json", i)))
	}
	file, lines := a.export(t)
	_, linesB := b.export(t)
	if strings.Join(lines, "\n") != strings.Join(linesB, "\n") {
		t.Fatal("A and B export different ledgers")
	}
	verified := map[string]int{}
	for _, l := range lines {
		var e receipt.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		verified[e.Type]++
	}
	// Per session: begin, verify, receipt; nothing twice.
	if len(lines) != 3*sessions {
		t.Fatalf("ledger has %d entries for %d sessions, want %d: %v", len(lines), sessions, 3*sessions, verified)
	}
	for _, r := range rcpts {
		if res, code := a.offline(t, "ledger", "verify", "--file", file, "--receipt", r); code != 0 || !res.Valid {
			t.Fatalf("ledger verify --receipt %s: exit %d %+v", filepath.Base(r), code, res)
		}
	}
}

// TestRetention: with --retain 3s a verified session is removed (Verify
// then answers NotFound) while an unfinished one, inside
// --retain-unfinished, stays verifiable; the ledger keeps every entry and
// still verifies. On PostgreSQL and on the embedded store.
func TestRetention(t *testing.T) {
	retain := []string{"--retain", "3s", "--retain-unfinished", "1h"}
	t.Run("postgres", func(t *testing.T) {
		c := newClinic(t)
		checkRetention(t, c, replicas(t, 1, c, retain...)[0])
	})
	t.Run("bbolt", func(t *testing.T) {
		c := newClinic(t)
		checkRetention(t, c, startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), args: retain}))
	})
}

func checkRetention(t *testing.T, c *clinicDB, d *daemon) {
	done := d.beginNamed(t, c, "clinic", "p1", "Follow-up")
	c.save(t, "p1", "Follow-up", 1)
	d.verify(t, done.SessionID)
	open := d.beginNamed(t, c, "clinic", "p2", "Follow-up")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := d.ctl(t, "verify", "--session", done.SessionID)
		if code != 0 && strings.Contains(out, "NotFound") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the verified session is still there after 30s (exit %d): %s\n%s", code, out, d.logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(d.logs(), "removed expired sessions") {
		t.Errorf("no retention line in the log:\n%s", d.logs())
	}
	c.save(t, "p2", "Follow-up", 1)
	if got := d.verify(t, open.SessionID).summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("the unfinished session after retention ran = %s", got)
	}
	file, lines := d.export(t)
	if len(lines) != 6 {
		t.Fatalf("ledger has %d entries, want 6 (retention keeps them)", len(lines))
	}
	if res, code := d.offline(t, "ledger", "verify", "--file", file); code != 0 || !res.Valid {
		t.Fatalf("ledger verify after retention: exit %d %+v", code, res)
	}
}

// TestHealthListenerFollowsTheStore: --health-listen serves the gRPC
// health service in plaintext; while the PostgreSQL store is down the
// VerifierService is NOT_SERVING (a readiness probe takes the replica out)
// and the overall status stays SERVING (a liveness probe does not restart
// it); when the store is back, so is the service.
func TestHealthListenerFollowsTheStore(t *testing.T) {
	dsn, env, pg := storeServer(t)
	healthAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{env: env, args: []string{"--store", dsn, "--store-password-env", storePasswordEnv, "--health-listen", healthAddr}})
	conn, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	status := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health check %q: %v", service, err)
		}
		return r.GetStatus()
	}
	const svc = "verifierd.verifier.v1.VerifierService"
	waitFor := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for status(svc) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not %s after 30s\n%s", svc, want, d.logs())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if status("") != healthpb.HealthCheckResponse_SERVING || status(svc) != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("not SERVING at start")
	}
	// Only the health service is served there.
	if _, err := verifierv1.NewVerifierServiceClient(conn).Verify(context.Background(), &verifierv1.VerifyRequest{SessionId: "x"}); grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("Verify on the health listener: %v, want Unimplemented", err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
	if status("") != healthpb.HealthCheckResponse_SERVING {
		t.Error("the overall status left SERVING with the store down: a liveness probe would restart the replica")
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(healthpb.HealthCheckResponse_SERVING)
}

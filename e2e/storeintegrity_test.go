package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// runVerifierd runs the verifierd binary to its end (a `store` command, or
// a daemon expected to refuse to start) and returns its exit code and
// output.
func runVerifierd(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "verifierd"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// wantDataLoss checks that GetSession and Verify of a damaged session
// answer DataLoss naming it, and serve nothing.
func wantDataLoss(t *testing.T, d *daemon, id string) {
	t.Helper()
	c := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := c.GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: id})
	if st, _ := grpcstatus.FromError(err); st.Code() != codes.DataLoss || !strings.Contains(st.Message(), id) {
		t.Errorf("GetSession of the damaged session = %v, %v; want DataLoss naming %s", got, err, id)
	}
	out, code := d.ctl(t, "verify", "--session", id)
	if code == 0 || !strings.Contains(out, "DataLoss") && !strings.Contains(out, "DATA_LOSS") && !strings.Contains(out, "integrity check") {
		t.Errorf("verify of the damaged session: exit %d %s; want DataLoss", code, out)
	}
}

// flipInside flips one byte of the stored result of session id in the
// bbolt file of dataDir (the daemon stopped): inside the note text when
// the result holds it, else inside the outcome.
func flipInside(t *testing.T, dataDir, id, note string) {
	t.Helper()
	path := filepath.Join(dataDir, "verifierd.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var value []byte
	err = db.View(func(tx *bolt.Tx) error {
		value = bytes.Clone(tx.Bucket([]byte("results")).Get([]byte(id)))
		return nil
	})
	db.Close()
	if err != nil || len(value) == 0 {
		t.Fatalf("session %s has no stored result: %v", id, err)
	}
	at := bytes.Index(value, []byte(note))
	if at < 0 {
		at = bytes.Index(value, []byte(`"outcome":"`)) + len(`"outcome":"`)
	} else {
		at += len(note) - 1
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, value) {
		t.Fatalf("the result of %s is not stored contiguously in %s", id, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// bbolt copies pages on write: earlier copies of the value may linger
	// on free pages. The same byte is flipped in each; one is the live one.
	for off := 0; ; {
		i := bytes.Index(raw[off:], value)
		if i < 0 {
			break
		}
		off += i
		if _, err := f.WriteAt([]byte{raw[off+at] ^ 0x80}, int64(off+at)); err != nil {
			t.Fatal(err)
		}
		off += len(value)
	}
}

// TestCorruptStoredResult: one byte flipped inside a stored result in the
// bbolt file. The daemon answers DataLoss naming the session (GetSession
// and Verify), never the damaged value; `store check` lists the session
// and exits 1; `store salvage` leaves it out and says so, keeping the
// sound session.
func TestCorruptStoredResult(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	damaged := d.begin(t, c, "p1", "Triage")
	c.save(t, "p1", "Triage", 1)
	d.verify(t, damaged.SessionID)
	sound := d.begin(t, c, "p2", "Checkup")
	c.save(t, "p2", "Checkup", 1)
	d.verify(t, sound.SessionID)
	d.stop()

	flipInside(t, d.dataDir, damaged.SessionID, "Triage")
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	wantDataLoss(t, d, damaged.SessionID)
	if _, err := d.client(t).GetSession(context.Background(), &verifierv1.GetSessionRequest{SessionId: sound.SessionID}); err != nil {
		t.Errorf("GetSession of the sound session: %v", err)
	}
	d.stop()

	code, out, errs := runVerifierd(t, nil, "store", "check", "--data-dir", d.dataDir)
	if code != 1 || !strings.Contains(out, "damaged: session "+damaged.SessionID+": its stored result") || strings.Contains(out, sound.SessionID) {
		t.Errorf("store check: exit %d\n%s%s\nwant exit 1 listing %s only", code, out, errs, damaged.SessionID)
	}
	salvaged := filepath.Join(t.TempDir(), "salvaged")
	code, out, errs = runVerifierd(t, nil, "store", "salvage", "--data-dir", d.dataDir, "--out", salvaged)
	if code != 0 || !strings.Contains(out, "skipped: session "+damaged.SessionID) || !strings.Contains(out, "1 sessions") {
		t.Errorf("store salvage: exit %d\n%s%s\nwant the damaged session skipped, 1 session kept", code, out, errs)
	}
	code, out, errs = runVerifierd(t, nil, "store", "check", "--data-dir", salvaged, "--evidence-key", session.EvidenceKeyPath(d.dataDir))
	if code != 0 || !strings.Contains(out, "is sound") {
		t.Errorf("store check of the salvaged store: exit %d\n%s%s", code, out, errs)
	}
}

// pgStoreDaemon starts a daemon on a fresh PostgreSQL store with the
// evidence key in a file, and returns it with the DSN, the environment
// holding the store password, the key file and the server.
func pgStoreDaemon(t *testing.T, c *clinicDB) (*daemon, string, []string, string, func(sql string)) {
	t.Helper()
	dsn, env, pg := storeServer(t)
	evidence := filepath.Join(t.TempDir(), "evidence.key")
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evidence, key, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), env: env,
		args: []string{"--store", dsn, "--store-password-env", storePasswordEnv, "--evidence-key", evidence}})
	exec := func(sql string) {
		t.Helper()
		if err := pg.Exec(context.Background(), pg.Database, sql); err != nil {
			t.Fatal(err)
		}
	}
	return d, dsn, env, evidence, exec
}

// TestCorruptStoredResultPostgres: the same flipped byte, by an UPDATE of
// the row in a PostgreSQL store while the daemon runs.
func TestCorruptStoredResultPostgres(t *testing.T) {
	c := newClinic(t)
	d, dsn, env, evidence, sql := pgStoreDaemon(t, c)
	damaged := d.beginNamed(t, c, "clinic", "p1", "Triage")
	c.save(t, "p1", "Triage", 1)
	d.verify(t, damaged.SessionID)
	sound := d.beginNamed(t, c, "clinic", "p2", "Checkup")
	c.save(t, "p2", "Checkup", 1)
	d.verify(t, sound.SessionID)

	// One byte of the result: inside "outcome":"VERIFIED".
	sql(`UPDATE verifierd_sessions SET result = set_byte(result, position('"outcome":"'::bytea in result) + 10, 87) WHERE id = '` + damaged.SessionID + `'`)
	wantDataLoss(t, d, damaged.SessionID)
	if _, err := d.client(t).GetSession(context.Background(), &verifierv1.GetSessionRequest{SessionId: sound.SessionID}); err != nil {
		t.Errorf("GetSession of the sound session: %v", err)
	}

	code, out, errs := runVerifierd(t, env, "store", "check", "--store", dsn, "--store-password-env", storePasswordEnv, "--evidence-key", evidence)
	if code != 1 || !strings.Contains(out, "damaged: session "+damaged.SessionID+": its stored result") || strings.Contains(out, sound.SessionID) {
		t.Errorf("store check: exit %d\n%s%s\nwant exit 1 listing %s only", code, out, errs, damaged.SessionID)
	}
	sql("CREATE DATABASE salvaged")
	out2 := strings.Replace(dsn, "/"+dsnDatabase(dsn)+"?", "/salvaged?", 1)
	code, out, errs = runVerifierd(t, env, "store", "salvage", "--store", dsn, "--out", out2, "--store-password-env", storePasswordEnv, "--evidence-key", evidence)
	if code != 0 || !strings.Contains(out, "skipped: session "+damaged.SessionID) || !strings.Contains(out, ": 1 sessions") {
		t.Errorf("store salvage: exit %d\n%s%s\nwant the damaged session skipped, 1 session kept", code, out, errs)
	}
	code, out, errs = runVerifierd(t, env, "store", "check", "--store", out2, "--store-password-env", storePasswordEnv, "--evidence-key", evidence)
	if code != 0 || !strings.Contains(out, "is sound") {
		t.Errorf("store check of the salvaged database: exit %d\n%s%s", code, out, errs)
	}
}

func dsnDatabase(dsn string) string {
	rest := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// TestReplicaWithOtherKeysRefused: a second replica on the same
// PostgreSQL store with another evidence key (and so, with its own data
// dir, another signing key) refuses to start, naming the flags and the
// store's key ids; the first keeps serving.
func TestReplicaWithOtherKeysRefused(t *testing.T) {
	c := newClinic(t)
	first, dsn, env, evidence, _ := pgStoreDaemon(t, c)
	s := first.beginNamed(t, c, "clinic", "p1", "Triage")
	firstKey, err := os.ReadFile(evidence)
	if err != nil {
		t.Fatal(err)
	}
	_, signingID := first.keyFile(t)

	other := filepath.Join(t.TempDir(), "other.key")
	otherKey := make([]byte, 32)
	if _, err := rand.Read(otherKey); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runVerifierd(t, env, "--listen", "127.0.0.1:0", "--http-listen", "", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--store", dsn, "--store-password-env", storePasswordEnv, "--evidence-key", other)
	for _, want := range []string{"--evidence-key", "--signing-key", "--rotate-keys", store.EvidenceKeyID(firstKey), store.EvidenceKeyID(otherKey), signingID} {
		if !strings.Contains(errs, want) {
			t.Errorf("the refusal does not name %q", want)
		}
	}
	if code != 1 || strings.Contains(errs, "verifierd listening") {
		t.Fatalf("a replica with other keys: exit %d\n%s", code, errs)
	}
	// The first replica is unaffected.
	c.save(t, "p1", "Triage", 1)
	if got := first.verify(t, s.SessionID).Outcome; got != "VERIFIED" {
		t.Errorf("the first replica after the refusal: %s", got)
	}
}

// TestCorruptStoredBaseline: one byte flipped inside a stored baseline
// chunk between Begin and Verify. Verify answers DataLoss naming the
// session and stores no result (the session is not judged against a
// damaged baseline); `store check` names the chunk.
func TestCorruptStoredBaseline(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	c.save(t, "p1", "earlier visit", 1) // a baseline with a record in it
	b := d.begin(t, c, "p1", "Follow-up")
	d.stop()

	path := filepath.Join(d.dataDir, "verifierd.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var chunk []byte
	err = db.View(func(tx *bolt.Tx) error {
		caps := tx.Bucket([]byte("baselines")).Bucket([]byte(b.SessionID))
		if caps == nil {
			return errors.New("no baseline")
		}
		cb := caps.Bucket([]byte(b.SessionID + "/0"))
		if cb == nil {
			return errors.New("no capture 0")
		}
		_, v := cb.Cursor().First()
		chunk = bytes.Clone(v)
		return nil
	})
	db.Close()
	if err != nil || len(chunk) <= store.MACSize {
		t.Fatalf("session %s's baseline chunk: %d bytes, %v", b.SessionID, len(chunk), err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := (len(chunk) - store.MACSize) / 2 // inside the records, before the tag
	for off := 0; ; {
		i := bytes.Index(raw[off:], chunk)
		if i < 0 {
			break
		}
		off += i
		if _, err := f.WriteAt([]byte{raw[off+at] ^ 0x01}, int64(off+at)); err != nil {
			t.Fatal(err)
		}
		off += len(chunk)
	}
	f.Close()

	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	c.save(t, "p1", "Follow-up", 1)
	out, code := d.ctl(t, "verify", "--session", b.SessionID)
	if code == 0 || !strings.Contains(out, "DataLoss") || !strings.Contains(out, b.SessionID) || !strings.Contains(out, "baseline capture 0") {
		t.Errorf("verify against a damaged baseline: exit %d %s; want DataLoss naming the session and the chunk", code, out)
	}
	got, err := d.client(t).GetSession(context.Background(), &verifierv1.GetSessionRequest{SessionId: b.SessionID})
	if err != nil || got.GetResult() != nil {
		t.Errorf("GetSession after the refused verify: %v, %v; want the session without a result", got.GetResult(), err)
	}
	d.stop()
	code, stdout, errs := runVerifierd(t, nil, "store", "check", "--data-dir", d.dataDir)
	if code != 1 || !strings.Contains(stdout, "damaged: session "+b.SessionID+": its stored baseline capture 0 chunk 0") {
		t.Errorf("store check: exit %d\n%s%s", code, stdout, errs)
	}
}

// editLedger rewrites, in the bbolt file of dataDir (the daemon stopped),
// the ledger entry at seq with edit, and when rechain re-links every later
// entry onto the edited one, as an attacker without the signing key would.
func editLedger(t *testing.T, dataDir string, seq uint64, rechain bool, edit func(*receipt.Entry)) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dataDir, "verifierd.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("ledger"))
		prev := ""
		return b.ForEach(func(k, v []byte) error {
			var e receipt.Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			switch {
			case e.Seq == seq:
				edit(&e)
			case e.Seq > seq && rechain:
				e.Prev = prev
			default:
				prev = e.Hash()
				return nil
			}
			prev = e.Hash()
			return b.Put(bytes.Clone(k), e.Canonical())
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreCheckVerifiesLedger: `store check` verifies the ledger's chain
// and every signed checkpoint inside the store. An entry edited in the
// stopped store's file, with the chain re-linked after it or not, is
// damage (exit 1, naming the entry); before the check knew the ledger it
// said "sound", and only an offline `ledger verify` of an export caught it.
func TestStoreCheckVerifiesLedger(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	for i, p := range []string{"p1", "p2", "p3"} {
		s := d.begin(t, c, p, "Triage")
		c.save(t, p, "Triage", i+1)
		d.verify(t, s.SessionID)
	}
	d.stop() // signs a checkpoint at the head

	code, out, errs := runVerifierd(t, nil, "store", "check", "--data-dir", d.dataDir)
	if code != 0 || !strings.Contains(out, "is sound") || !strings.Contains(out, "signed checkpoints verified") || strings.Contains(out, " 0 signed checkpoints") {
		t.Fatalf("store check of the untouched store: exit %d\n%s%s", code, out, errs)
	}
	for _, tc := range []struct {
		name    string
		rechain bool
		want    string
	}{
		{"edited, chain re-linked", true, "the checkpoint signed at seq"},
		{"edited, chain left", false, "entry 2 was changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raw, err := os.ReadFile(filepath.Join(d.dataDir, "verifierd.db"))
			if err != nil {
				t.Fatal(err)
			}
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.WriteFile(filepath.Join(dir, "verifierd.db"), raw, 0o600))
			must(os.CopyFS(filepath.Join(dir, "keys"), os.DirFS(filepath.Join(d.dataDir, "keys"))))
			keys, _ := filepath.Glob(filepath.Join(dir, "keys", "*"))
			for _, k := range keys {
				must(os.Chmod(k, 0o600)) // CopyFS copies no mode; the check refuses a readable key
			}
			editLedger(t, dir, 2, tc.rechain, func(e *receipt.Entry) { e.Digest = receipt.PayloadDigest([]byte("forged")) })
			code, out, errs := runVerifierd(t, nil, "store", "check", "--data-dir", dir)
			if code != 1 || !strings.Contains(out, "damaged: ledger:") || !strings.Contains(out, tc.want) || strings.Contains(out, "is sound") {
				t.Errorf("store check of an edited ledger: exit %d\n%s%s\nwant exit 1 with a ledger problem naming %q", code, out, errs, tc.want)
			}
		})
	}
}

// TestConsoleShowsDamagedSession: one session whose stored result fails
// its integrity check is a DAMAGED row in the console's list and in the
// reconciliation queue, and its page says so; the other sessions and their
// tasks stay listed. Before, the one damaged session made /console/ and
// /console/reconciliation answer 500 and the whole queue disappeared.
func TestConsoleShowsDamagedSession(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	c := newClinic(t)
	damaged := d.begin(t, c, "p1", "Triage")
	c.save(t, "p1", "Triage", 1)
	d.verify(t, damaged.SessionID)
	dup := d.begin(t, c, "p2", "Checkup")
	c.save(t, "p2", "Checkup", 2) // a double submit: a reconciliation task
	d.verify(t, dup.SessionID)
	d.stop()
	flipInside(t, d.dataDir, damaged.SessionID, "Triage")
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ path, want string }{
		{"/console/", dup.SessionID},
		{"/console/reconciliation", dup.SessionID},
		{"/console/sessions/" + damaged.SessionID, "integrity check"},
	} {
		code, page := httpDo(t, "GET", httpAddr, "", p.path, "", nil)
		if code != http.StatusOK || !strings.Contains(page, "DAMAGED") || !strings.Contains(page, damaged.SessionID) || !strings.Contains(page, p.want) {
			t.Errorf("GET %s = %d; want 200 with a DAMAGED row for %s and %q:\n%s", p.path, code, damaged.SessionID, p.want, page)
		}
	}
	if code, page := httpDo(t, "GET", httpAddr, "", "/console/?outcome=DAMAGED", "", nil); code != http.StatusOK || !strings.Contains(page, damaged.SessionID) || strings.Contains(page, dup.SessionID) {
		t.Errorf("the DAMAGED filter = %d:\n%s", code, page)
	}
}

// TestKeysCheckedWhileServing: replicas of one PostgreSQL store hold a
// lease. A second daemon with --rotate-keys while the first serves is
// refused (before, it rotated and left two replicas on one store with
// different keys, the running one never re-checking). When the store's
// key ids change under a serving replica anyway (edited here), its next
// signing Verify answers FailedPrecondition at once, and within its check
// interval every call does and its VerifierService health is NOT_SERVING.
// Once the first replica is stopped the rotation goes through.
func TestKeysCheckedWhileServing(t *testing.T) {
	c := newClinic(t)
	first, dsn, env, _, sql := pgStoreDaemon(t, c)
	s := first.beginNamed(t, c, "clinic", "p1", "Triage")

	other := filepath.Join(t.TempDir(), "other.key")
	otherKey := make([]byte, 32)
	if _, err := rand.Read(otherKey); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	rotate := []string{"--listen", "127.0.0.1:0", "--http-listen", "", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--store", dsn, "--store-password-env", storePasswordEnv, "--evidence-key", other, "--rotate-keys"}
	code, _, errs := runVerifierd(t, env, rotate...)
	if code != 1 || !strings.Contains(errs, "another replica is serving this store") || !strings.Contains(errs, "--rotate-keys") {
		t.Fatalf("--rotate-keys while a replica serves: exit %d\n%s\nwant exit 1 naming the running replica", code, errs)
	}
	c.save(t, "p1", "Triage", 1)
	if got := first.verify(t, s.SessionID).Outcome; got != "VERIFIED" {
		t.Fatalf("the first replica after the refused rotation: %s", got)
	}

	// The key ids change under the serving replica.
	s2 := first.beginNamed(t, c, "clinic", "p2", "Triage")
	sql(`UPDATE verifierd_store_keys SET value = 'sha256:` + strings.Repeat("0", 64) + `' WHERE name = 'signing_key_id'`)
	c.save(t, "p2", "Triage", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := first.client(t)
	if _, err := cl.Verify(ctx, &verifierv1.VerifyRequest{SessionId: s2.SessionID}); grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "changed while this daemon ran") {
		t.Fatalf("Verify after the keys changed: %v; want FailedPrecondition (nothing signed under keys the store no longer records)", err)
	}
	conn, err := grpc.NewClient(first.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "verifierd.verifier.v1.VerifierService"})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("VerifierService still serving 2 minutes after its keys changed: %v %v\n%s", r, err, first.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := cl.GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: s.SessionID}); grpcstatus.Code(err) != codes.FailedPrecondition {
		t.Errorf("GetSession on the fenced replica: %v, want FailedPrecondition", err)
	}

	// With the first replica stopped (its lease gone), the rotation goes
	// through, and the sessions stay readable under the new keys.
	first.stop()
	rotated := startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), env: env,
		args: []string{"--store", dsn, "--store-password-env", storePasswordEnv, "--evidence-key", other, "--rotate-keys"}})
	if _, err := rotated.client(t).GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: s.SessionID}); err != nil {
		t.Errorf("GetSession after the rotation: %v", err)
	}
}

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/receipt"
)

// namedClinic registers the clinic's deployment by name in a daemon config.
func namedClinic(t *testing.T, c *clinicDB, extra string) string {
	t.Helper()
	return fmt.Sprintf("deployments:\n  clinic: %s\n%s", c.deployment, extra)
}

func (d *daemon) beginNamed(t *testing.T, c *clinicDB, name, patient, note string) beginOutput {
	t.Helper()
	out, code := d.ctl(t, "begin", "--deployment-name", name, "--effects", c.effects, "--param", "patient_id="+patient, "--param", "note="+note)
	if code != 0 {
		t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	return mustJSON[beginOutput](t, out)
}

// keyFile saves what `verifyctl key` prints and returns the file and key id.
func (d *daemon) keyFile(t *testing.T) (string, string) {
	t.Helper()
	out, code := d.ctl(t, "key")
	if code != 0 {
		t.Fatalf("key exit %d: %s", code, out)
	}
	k := mustJSON[struct {
		PublicKey string `json:"public_key"`
		KeyID     string `json:"key_id"`
	}](t, out)
	pub, err := receipt.ParsePublicKey(k.PublicKey)
	if err != nil || receipt.KeyID(pub) != k.KeyID {
		t.Fatalf("key %s does not hash to its id %s", k.PublicKey, k.KeyID)
	}
	return writeFile(t, t.TempDir(), "key.json", out), k.KeyID
}

// export runs `ledger export` into a file and returns it and its entry
// lines; the export must end with one signed checkpoint of its last entry.
func (d *daemon) export(t *testing.T) (string, []string) {
	t.Helper()
	file, lines, _ := d.exportSigned(t)
	return file, lines
}

// exportSigned is export, also returning the checkpoint line.
func (d *daemon) exportSigned(t *testing.T) (file string, entries []string, checkpoint string) {
	t.Helper()
	out, code := d.ctl(t, "ledger", "export")
	if code != 0 {
		t.Fatalf("ledger export exit %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	checkpoint, entries = lines[len(lines)-1], lines[:len(lines)-1]
	env, err := receipt.ParseEnvelope([]byte(checkpoint))
	if err != nil || env.PayloadType != receipt.PayloadTypeCheckpoint {
		t.Fatalf("the export does not end with a signed checkpoint (%v):\n%s", err, out)
	}
	var cp receipt.Checkpoint
	if err := json.Unmarshal(env.Payload, &cp); err != nil || cp.Seq != uint64(len(entries)) {
		t.Fatalf("the export's checkpoint %s does not cover its %d entries (%v)", env.Payload, len(entries), err)
	}
	return writeFile(t, t.TempDir(), "ledger.jsonl", out), entries, checkpoint
}

type offlineResult struct {
	Valid              bool            `json:"valid"`
	Reason             string          `json:"reason"`
	Seq                uint64          `json:"seq"`
	Payload            json.RawMessage `json:"payload"`
	ValidChain         bool            `json:"valid_chain"`
	SignedHeadVerified bool            `json:"signed_head_verified"`
	Tampering          string          `json:"tampering"`
	Checkpoint         *struct {
		Seq uint64    `json:"seq"`
		At  time.Time `json:"at"`
	} `json:"checkpoint"`
	Mismatch *struct {
		Field    string `json:"field"`
		Expected string `json:"expected"`
		Found    string `json:"found"`
	} `json:"mismatch"`
}

// offline runs an offline verifyctl command (no --addr).
func (d *daemon) offline(t *testing.T, args ...string) (offlineResult, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins.dir, "verifyctl"), args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("verifyctl %v: %v", args, err)
	}
	return mustJSON[offlineResult](t, stdout.String()), code
}

func decodePayload(t *testing.T, file string) (map[string]any, []byte) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	env, err := receipt.ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p, env.Payload
}

// wantRung is the oracle ladder as docs/receipts.md states it, per
// first-party kind.
var wantRung = map[string]int{
	"onscreen": 0, "ui_readback": 1,
	"sql": 2, "rest": 2, "graphql": 2, "fhir": 2, "email": 2, "file": 2, "document": 2, "document-hash": 2,
}

// checkRungs: every effect of a verify answer states its read's oracle
// rung, and its signed receipt states the same one. Every verify of the
// suite goes through it, so a receipt of each kind the suite reads is
// checked. A plugin kind is placed by its tier.
func checkRungs(t *testing.T, v verifyOutput) {
	t.Helper()
	if len(v.Receipt) == 0 {
		t.Errorf("the verify answer carries no receipt")
		return
	}
	env, err := receipt.ParseEnvelope(v.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Effects []struct {
			OracleRung *int   `json:"oracle_rung"`
			Substrate  string `json:"substrate"`
		} `json:"effects"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil || len(p.Effects) != len(v.Effects) {
		t.Fatalf("receipt payload %s (%v): want %d effect claims", env.Payload, err, len(v.Effects))
	}
	for i, e := range v.Effects {
		want, ok := wantRung[e.Substrate]
		if !ok {
			want = map[int]int{1: 2, 2: 1}[e.Tier]
		}
		if e.OracleRung != want || p.Effects[i].OracleRung == nil || *p.Effects[i].OracleRung != want || p.Effects[i].Substrate != e.Substrate {
			got := "none"
			if r := p.Effects[i].OracleRung; r != nil {
				got = fmt.Sprint(*r)
			}
			t.Errorf("effect %d (%s, tier %d): oracle_rung %d, in the receipt %s; want %d", i, e.Substrate, e.Tier, e.OracleRung, got, want)
		}
	}
}

// TestReceiptsAndLedger: a Verify returns a receipt that checks offline
// with the daemon's key and fails on any change; the exported ledger
// checks and fails, naming the seq, on a deleted, moved or edited line; a
// kill -9 keeps the key and the chain, and the next Verify chains onto the
// old head.
func TestReceiptsAndLedger(t *testing.T) {
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, "")})
	key, keyID := d.keyFile(t)

	b := d.beginNamed(t, c, "clinic", "p1", "Follow-up")
	c.save(t, "p1", "Follow-up", 1)
	dir := t.TempDir()
	rcpt := filepath.Join(dir, "receipt.json")
	out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", rcpt)
	if code != 0 {
		t.Fatalf("verify exit %d: %s", code, out)
	}
	v := mustJSON[struct {
		Outcome string          `json:"outcome"`
		Receipt json.RawMessage `json:"receipt"`
	}](t, out)
	if v.Outcome != "VERIFIED" || len(v.Receipt) == 0 {
		t.Fatalf("verify: %s", out)
	}
	// Verifying again returns the same receipt.
	again, _ := d.ctl(t, "verify", "--session", b.SessionID)
	if r := mustJSON[struct {
		Receipt json.RawMessage `json:"receipt"`
	}](t, again); !bytes.Equal(compact(t, r.Receipt), compact(t, v.Receipt)) {
		t.Errorf("a second verify returned another receipt")
	}

	if r, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--public-key", key); code != 0 || !r.Valid {
		t.Fatalf("receipt verify: exit %d %+v", code, r)
	}
	if r, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--key-id", keyID); code != 0 || !r.Valid {
		t.Fatalf("receipt verify --key-id: exit %d %+v", code, r)
	}
	// `verify` output holds the envelope under "receipt" and is accepted too.
	if _, code := d.offline(t, "receipt", "verify", "--receipt", writeFile(t, dir, "verify.json", out), "--public-key", key); code != 0 {
		t.Errorf("receipt verify on verify's output: exit %d", code)
	}
	p, payload := decodePayload(t, rcpt)
	if p["session_id"] != b.SessionID || p["terminal_outcome"] != "VERIFIED" || p["deployment"].(map[string]any)["name"] != "clinic" {
		t.Errorf("payload %s", payload)
	}
	effects := p["effects"].([]any)
	if e := effects[0].(map[string]any); e["contract_hash"] != b.Effects[0].ContractHash || e["verdict"] != "CONFIRMED" || e["tier"] != 1.0 || e["oracle_rung"] != 2.0 ||
		len(e["evidence_digests"].([]any)) != 1 || !strings.HasPrefix(e["evidence_digests"].([]any)[0].(string), "hmac-sha256:") {
		t.Errorf("effect claim %v", e)
	}

	tampered := func(name string, edit func(env *receipt.Envelope)) string {
		data, _ := os.ReadFile(rcpt)
		env, _ := receipt.ParseEnvelope(data)
		edit(env)
		raw, _ := json.Marshal(env)
		return writeFile(t, dir, name, string(raw))
	}
	other := startDaemon(t, daemonOpts{})
	otherKey, _ := other.keyFile(t)
	for name, args := range map[string][]string{
		"one flipped byte": {"--receipt", tampered("flipped.json", func(e *receipt.Envelope) {
			e.Payload = bytes.Replace(e.Payload, []byte(`"CONFIRMED"`), []byte(`"CONFIRMEE"`), 1)
		}), "--public-key", key},
		"a changed signature": {"--receipt", tampered("changed-sig.json", func(e *receipt.Envelope) {
			e.Signatures[0].Sig[0] ^= 1
		}), "--public-key", key},
		"another daemon's key": {"--receipt", rcpt, "--public-key", otherKey},
	} {
		if r, code := d.offline(t, append([]string{"receipt", "verify"}, args...)...); code != 1 || r.Valid {
			t.Errorf("%s: exit %d %+v, want exit 1", name, code, r)
		}
	}

	// The ledger: begin, verify, receipt.
	file, lines := d.export(t)
	if len(lines) != 3 {
		t.Fatalf("ledger has %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if r, code := d.offline(t, "ledger", "verify", "--file", file, "--receipt", rcpt); code != 0 || !r.Valid {
		t.Fatalf("ledger verify: exit %d %+v", code, r)
	}
	for name, tc := range map[string]struct {
		lines   []string
		wantSeq uint64
	}{
		"deleted":   {[]string{lines[0], lines[2]}, 2},
		"reordered": {[]string{lines[0], lines[2], lines[1]}, 2},
		"edited":    {[]string{lines[0], strings.Replace(lines[1], `"type":"verify"`, `"type":"verifx"`, 1), lines[2]}, 2},
	} {
		f := writeFile(t, dir, "ledger-"+strings.ReplaceAll(name, " ", "-")+".jsonl", strings.Join(tc.lines, "\n")+"\n")
		if r, code := d.offline(t, "ledger", "verify", "--file", f); code != 1 || r.Valid || r.Seq != tc.wantSeq || !strings.Contains(r.Reason, fmt.Sprintf("seq %d", tc.wantSeq)) {
			t.Errorf("%s: exit %d %+v, want exit 1 naming seq %d", name, code, r, tc.wantSeq)
		}
	}

	// kill -9, restart: the same key, and the chain goes on from the old head.
	entries, err := receipt.ReadEntries(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	oldHead := entries[len(entries)-1].Hash()
	d.kill9()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	if _, id := d.keyFile(t); id != keyID {
		t.Fatalf("key id after restart %s, want %s", id, keyID)
	}
	b2 := d.beginNamed(t, c, "clinic", "p2", "Second")
	c.save(t, "p2", "Second", 1)
	rcpt2 := filepath.Join(dir, "receipt2.json")
	if out, code := d.ctl(t, "verify", "--session", b2.SessionID, "--receipt-out", rcpt2); code != 0 {
		t.Fatalf("verify after restart: %d %s", code, out)
	}
	file, lines = d.export(t)
	after, _ := receipt.ReadEntries(strings.NewReader(strings.Join(lines, "\n")))
	if len(after) != 6 || after[3].Prev != oldHead || after[3].Type != "begin" {
		t.Fatalf("after restart the ledger is %+v; want entry 4 chained onto %s", after, oldHead)
	}
	if r, code := d.offline(t, "ledger", "verify", "--file", file, "--receipt", rcpt2); code != 0 || !r.Valid {
		t.Fatalf("ledger verify after restart: exit %d %+v", code, r)
	}
	if r, code := d.offline(t, "receipt", "verify", "--receipt", rcpt2, "--public-key", key); code != 0 || !r.Valid {
		t.Fatalf("receipt after restart: exit %d %+v", code, r)
	}
	// The daemon's valid signature of another receipt, swapped in.
	data2, _ := os.ReadFile(rcpt2)
	env2, _ := receipt.ParseEnvelope(data2)
	swapped := tampered("swapped.json", func(e *receipt.Envelope) { e.Signatures = env2.Signatures })
	if r, code := d.offline(t, "receipt", "verify", "--receipt", swapped, "--public-key", key); code != 1 || r.Valid {
		t.Errorf("swapped signature: exit %d %+v, want exit 1", code, r)
	}
}

func compact(t *testing.T, raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReceiptHoldsNoRedactedValue: the receipt of a session whose
// deployment redacts the note holds neither the note nor any parameter
// value, decoded or not.
func TestReceiptHoldsNoRedactedValue(t *testing.T) {
	c := newClinic(t)
	dep, err := os.ReadFile(c.deployment)
	if err != nil {
		t.Fatal(err)
	}
	c.deployment = writeFile(t, t.TempDir(), "redacting.yaml", string(dep)+"  evidence_redact_fields: [note]\n")
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, "")})
	const note, patient = "Allergic-to-penicillin-7731", "patient-secret-4412"
	b := d.beginNamed(t, c, "clinic", patient, note)
	c.save(t, patient, note, 1)
	rcpt := filepath.Join(t.TempDir(), "receipt.json")
	out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", rcpt)
	if code != 0 || !strings.Contains(out, `"VERIFIED"`) {
		t.Fatalf("verify: %d %s", code, out)
	}
	raw, _ := os.ReadFile(rcpt)
	_, payload := decodePayload(t, rcpt)
	for _, secret := range []string{note, patient, base64.StdEncoding.EncodeToString([]byte(note))} {
		if bytes.Contains(payload, []byte(secret)) || bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the receipt holds %q:\n%s", secret, payload)
		}
	}
}

// TestReverifyAfterRepair: a double submit needs reconciling; a person
// deletes the duplicate; Reverify answers VERIFIED with a new receipt,
// beside the first result, and the ledger holds both receipts.
func TestReverifyAfterRepair(t *testing.T) {
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, "")})
	key, _ := d.keyFile(t)
	b := d.beginNamed(t, c, "clinic", "p1", "Follow-up")
	c.save(t, "p1", "Follow-up", 2)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.json")
	out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", first)
	if code != 0 || mustJSON[verifyOutput](t, out).Outcome != "RECONCILIATION_REQUIRED" {
		t.Fatalf("double submit: %d %s", code, out)
	}
	// Nothing repaired yet: still RECONCILIATION_REQUIRED, attempt 1.
	out, code = d.ctl(t, "reverify", "--session", b.SessionID, "--reason", "checked, nothing repaired yet")
	if code != 0 || !strings.Contains(out, `"RECONCILIATION_REQUIRED"`) {
		t.Fatalf("reverify before the repair: %d %s", code, out)
	}
	c.run(t, "delete", c.path, "2") // the duplicate, by hand
	second := filepath.Join(dir, "second.json")
	out, code = d.ctl(t, "reverify", "--session", b.SessionID, "--reason", "deleted the duplicate encounter 2 by hand", "--receipt-out", second)
	if code != 0 {
		t.Fatalf("reverify: %d %s", code, out)
	}
	rv := mustJSON[struct {
		Attempt int `json:"attempt"`
		Result  struct {
			Outcome string `json:"outcome"`
		} `json:"result"`
	}](t, out)
	if rv.Attempt != 2 || rv.Result.Outcome != "VERIFIED" {
		t.Fatalf("reverify after the repair: %s", out)
	}
	if r, code := d.offline(t, "receipt", "verify", "--receipt", second, "--public-key", key); code != 0 || !r.Valid {
		t.Fatalf("the new receipt: %d %+v", code, r)
	}
	p, _ := decodePayload(t, second)
	if p["kind"] != "reverify" || p["attempt"] != 2.0 || p["terminal_outcome"] != "VERIFIED" {
		t.Errorf("reverify payload %v", p)
	}
	// Verified now: a further Reverify is refused.
	if out, code := d.ctl(t, "reverify", "--session", b.SessionID, "--reason", "again"); code != 3 {
		t.Errorf("reverify of a verified session: exit %d %s, want 3 (FailedPrecondition)", code, out)
	}

	out, code = d.ctl(t, "session", "--session", b.SessionID)
	s := mustJSON[struct {
		Result struct {
			Outcome string `json:"outcome"`
		} `json:"result"`
		Receipt         json.RawMessage `json:"receipt"`
		Reverifications []struct {
			Attempt int    `json:"attempt"`
			Reason  string `json:"reason"`
			Result  struct {
				Outcome string `json:"outcome"`
			} `json:"result"`
		} `json:"reverifications"`
	}](t, out)
	if code != 0 || s.Result.Outcome != "RECONCILIATION_REQUIRED" || len(s.Reverifications) != 2 ||
		s.Reverifications[1].Result.Outcome != "VERIFIED" || !strings.Contains(s.Reverifications[1].Reason, "duplicate") || len(s.Receipt) == 0 {
		t.Fatalf("session: %s", out)
	}

	file, lines := d.export(t)
	for _, r := range []string{first, second} {
		if res, code := d.offline(t, "ledger", "verify", "--file", file, "--receipt", r); code != 0 || !res.Valid {
			t.Errorf("ledger verify --receipt %s: %d %+v", filepath.Base(r), code, res)
		}
	}
	var types []string
	for _, l := range lines {
		var e receipt.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	want := "begin verify reconciliation_opened receipt reverify reconciliation_opened receipt reverify reconciliation_closed receipt"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("ledger types\n got %s\nwant %s", got, want)
	}

	// A VERIFIED first result cannot be re-verified.
	b2 := d.beginNamed(t, c, "clinic", "p3", "Fine")
	c.save(t, "p3", "Fine", 1)
	d.verify(t, b2.SessionID)
	if out, code := d.ctl(t, "reverify", "--session", b2.SessionID, "--reason", "why not"); code != 3 || !strings.Contains(out, "FailedPrecondition") {
		t.Errorf("reverify of a VERIFIED session: exit %d %s", code, out)
	}
}

// TestVerifyArtifact: only the exact digest and size are CONFIRMED; the
// same name with other bytes and an absent name are REFUTED; a store that
// cannot be read is INDETERMINATE. Each answer carries a signed receipt.
func TestVerifyArtifact(t *testing.T) {
	root := filepath.Join(t.TempDir(), "exports")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dep := writeFile(t, dir, "docs.yaml", fmt.Sprintf("effects:\n  kind: document-hash\n  root: %s\n", root))
	d := startDaemon(t, daemonOpts{config: fmt.Sprintf("deployments:\n  exports: %s\n", dep)})
	key, _ := d.keyFile(t)

	want := []byte("%PDF-1.7 the invoice the automation exported")
	if err := os.WriteFile(filepath.Join(root, "invoice.pdf"), want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "other.pdf"), []byte("old bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	exact := writeFile(t, local, "invoice.pdf", string(want))
	otherBytes := writeFile(t, t.TempDir(), "other.pdf", "new bytes, not in the store")
	absent := writeFile(t, local, "missing.pdf", string(want))

	type answer struct {
		Verdict string `json:"verdict"`
		Reasons []struct {
			Code string `json:"code"`
		} `json:"reasons"`
		Tier       int             `json:"tier"`
		OracleRung int             `json:"oracle_rung"`
		Receipt    json.RawMessage `json:"receipt"`
	}
	ask := func(file string) (answer, string) {
		out, code := d.ctl(t, "artifact", "verify", "--deployment-name", "exports", "--file", file)
		if code != 0 {
			t.Fatalf("artifact verify %s: exit %d %s\n%s", file, code, out, d.logs())
		}
		return mustJSON[answer](t, out), out
	}
	sum := sha256.Sum256(want)
	for _, tc := range []struct {
		name, file, verdict, code string
	}{
		{"exact digest", exact, "CONFIRMED", "ARTIFACT_EXACT"},
		{"same name, other bytes", otherBytes, "REFUTED", "ARTIFACT_OTHER_BYTES"},
		{"absent", absent, "REFUTED", "ARTIFACT_ABSENT"},
	} {
		a, out := ask(tc.file)
		if a.Verdict != tc.verdict || len(a.Reasons) != 1 || a.Reasons[0].Code != tc.code || a.Tier != 1 || a.OracleRung != 2 {
			t.Errorf("%s: %s", tc.name, out)
			continue
		}
		f := writeFile(t, dir, "artifact.json", string(a.Receipt))
		if r, code := d.offline(t, "receipt", "verify", "--receipt", f, "--public-key", key); code != 0 || !r.Valid {
			t.Errorf("%s: receipt: %d %+v", tc.name, code, r)
			continue
		}
		var p struct {
			Artifact struct {
				SHA256 string `json:"sha256"`
			} `json:"artifact"`
			Verdict    string `json:"verdict"`
			Tier       int    `json:"tier"`
			OracleRung *int   `json:"oracle_rung"`
		}
		_, payload := decodePayload(t, f)
		if err := json.Unmarshal(payload, &p); err != nil {
			t.Fatal(err)
		}
		if tc.file == exact && p.Artifact.SHA256 != hex.EncodeToString(sum[:]) || p.Verdict != tc.verdict || p.Tier != 1 || p.OracleRung == nil || *p.OracleRung != 2 {
			t.Errorf("%s: payload %s", tc.name, payload)
		}
	}
	// The store goes away: INDETERMINATE, never REFUTED.
	if err := os.Rename(root, root+".gone"); err != nil {
		t.Fatal(err)
	}
	if a, out := ask(exact); a.Verdict != "INDETERMINATE" {
		t.Errorf("store down: %s", out)
	}
}

// TestRefusedBeginIsRecorded: a Begin naming a secret outside
// secrets.allow is REJECTED_POLICY, with a signed receipt of the refusal
// that is in the ledger.
func TestRefusedBeginIsRecorded(t *testing.T) {
	c := newClinic(t)
	dep := writeFile(t, t.TempDir(), "secret.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_password_env: NOT_ALLOWED_SECRET
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id
  sql_query_params: {patient_id: {param: patient_id}}
`, c.path))
	d := startDaemon(t, daemonOpts{config: fmt.Sprintf("deployments:\n  secretive: %s\n", dep)})
	key, _ := d.keyFile(t)
	out, code := d.ctl(t, "begin", "--deployment-name", "secretive", "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
	r := mustJSON[struct {
		Error struct {
			Code            string          `json:"code"`
			TerminalOutcome string          `json:"terminal_outcome"`
			Receipt         json.RawMessage `json:"receipt"`
		} `json:"error"`
	}](t, out)
	if code != 3 || r.Error.Code != "FailedPrecondition" || r.Error.TerminalOutcome != "REJECTED_POLICY" || len(r.Error.Receipt) == 0 {
		t.Fatalf("begin: exit %d %s", code, out)
	}
	f := writeFile(t, t.TempDir(), "refusal.json", string(r.Error.Receipt))
	if res, code := d.offline(t, "receipt", "verify", "--receipt", f, "--public-key", key); code != 0 || !res.Valid {
		t.Fatalf("refusal receipt: %d %+v", code, res)
	}
	file, _ := d.export(t)
	if res, code := d.offline(t, "ledger", "verify", "--file", file, "--receipt", f); code != 0 || !res.Valid {
		t.Fatalf("ledger: %d %+v", code, res)
	}
}

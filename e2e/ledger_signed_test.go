package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/receipt"
)

// TestLedgerSignedHead: an export ends at a checkpoint the daemon signed,
// and with the daemon's key `ledger verify` names each tampering of the
// tail that the chain alone cannot see: dropped last lines (truncated), an
// edited last line and a chain re-linked after an edit (rewritten), a
// correctly chained forged entry (extended). Without the key the chain
// check passes them and says that it checked only the chain.
func TestLedgerSignedHead(t *testing.T) {
	c := newClinic(t)
	// No checkpoint by count or time: the one the export ends at is
	// signed for it.
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), args: []string{"--ledger-checkpoint-every", "0", "--ledger-checkpoint-interval", "0"}})
	key, keyID := d.keyFile(t)
	dir := t.TempDir()
	var olderExport, laterReceipt string
	for i, p := range []string{"p1", "p2"} {
		b := d.beginNamed(t, c, "clinic", p, "Follow-up")
		c.save(t, p, "Follow-up", 1)
		laterReceipt = filepath.Join(dir, p+"-receipt.json")
		out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", laterReceipt)
		if code != 0 || mustJSON[verifyOutput](t, out).Outcome != "VERIFIED" {
			t.Fatalf("session %d: exit %d %s", i, code, out)
		}
		if i == 0 {
			olderExport, _, _ = d.exportSigned(t)
		}
	}
	file, lines, cpLine := d.exportSigned(t)
	if len(lines) != 6 {
		t.Fatalf("ledger has %d entries, want 6", len(lines))
	}
	for _, k := range [][]string{{"--public-key", key}, {"--key-id", keyID}} {
		r, code := d.offline(t, append([]string{"ledger", "verify", "--file", file}, k...)...)
		if code != 0 || !r.Valid || !r.ValidChain || !r.SignedHeadVerified || r.Checkpoint == nil || r.Checkpoint.Seq != 6 {
			t.Fatalf("honest export %s: exit %d %+v", k[0], code, r)
		}
	}
	if r, code := d.offline(t, "ledger", "verify", "--file", file); code != 0 || !r.ValidChain || r.SignedHeadVerified {
		t.Fatalf("honest export without a key: exit %d %+v", code, r)
	}

	entries, err := receipt.ReadEntries(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	line := func(e receipt.Entry) string { return string(e.Canonical()) }
	// The last line edited: its outcome digest swapped.
	edited := entries[5]
	edited.Digest = "sha256:" + strings.Repeat("ab", 32)
	// A forged entry chained correctly onto the real head.
	forged := receipt.Entry{Seq: 7, Prev: entries[5].Hash(), Type: "receipt", Session: entries[5].Session, Digest: "sha256:" + strings.Repeat("cd", 32), At: entries[5].At.Add(time.Second)}
	// The verify entry of session 2 edited, and the chain re-linked after it.
	re := append([]receipt.Entry(nil), entries...)
	re[4].Digest = "sha256:" + strings.Repeat("ef", 32)
	re[5].Prev = re[4].Hash()
	for _, tc := range []struct {
		name  string
		lines []string
		kind  string
		seq   uint64
	}{
		{"last two lines dropped", append(append([]string{}, lines[:4]...), cpLine), receipt.Truncated, 5},
		{"checkpoint dropped", lines, receipt.Truncated, 7},
		{"last line edited", append(append([]string{}, lines[:5]...), line(edited), cpLine), receipt.Rewritten, 6},
		{"forged entry appended", append(append([]string{}, lines...), cpLine, line(forged)), receipt.Extended, 7},
		{"forged entry before the checkpoint", append(append([]string{}, lines...), line(forged), cpLine), receipt.Extended, 7},
		{"re-chained after an edit", append(append([]string{}, lines[:4]...), line(re[4]), line(re[5]), cpLine), receipt.Rewritten, 6},
	} {
		f := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl", strings.Join(tc.lines, "\n")+"\n")
		// The chain alone holds: this is what went unnoticed.
		if r, code := d.offline(t, "ledger", "verify", "--file", f); code != 0 || !r.ValidChain || r.SignedHeadVerified {
			t.Errorf("%s without a key: exit %d %+v, want a holding chain, unsigned", tc.name, code, r)
		}
		for _, k := range [][]string{{"--public-key", key}, {"--key-id", keyID}} {
			r, code := d.offline(t, append([]string{"ledger", "verify", "--file", f}, k...)...)
			if code != 1 || r.Valid || r.SignedHeadVerified || r.Tampering != tc.kind || r.Seq != tc.seq || !strings.Contains(r.Reason, fmt.Sprintf("seq %d", tc.seq)) {
				t.Errorf("%s %s: exit %d %+v, want exit 1, %s at seq %d", tc.name, k[0], code, r, tc.kind, tc.seq)
			}
		}
	}
	// Cut back to an older checkpoint the daemon really signed (here: the
	// export taken after session 1): it ends at a valid signed head, and
	// only a later receipt the verifier holds shows the cut.
	if r, code := d.offline(t, "ledger", "verify", "--file", olderExport, "--public-key", key); code != 0 || !r.SignedHeadVerified || r.Checkpoint.Seq != 3 {
		t.Errorf("the older export alone: exit %d %+v, want it to pass (the documented limit)", code, r)
	}
	if r, code := d.offline(t, "ledger", "verify", "--file", olderExport, "--public-key", key, "--receipt", laterReceipt); code != 1 || r.Tampering != receipt.Truncated || r.Seq != 4 {
		t.Errorf("the older export against a later receipt: exit %d %+v, want truncated at seq 4", code, r)
	}
	// A checkpoint signed by another daemon vouches for nothing.
	other := startDaemon(t, daemonOpts{})
	otherKey, _ := other.keyFile(t)
	if r, code := d.offline(t, "ledger", "verify", "--file", file, "--public-key", otherKey); code != 1 || r.Tampering != receipt.Truncated {
		t.Errorf("another daemon's key: exit %d %+v", code, r)
	}
}

// TestLedgerCheckpointsSigned: the daemon signs a checkpoint in the
// transaction of every Nth entry, on its timer and at shutdown, and an
// export returns the stored one when it covers the head.
func TestLedgerCheckpointsSigned(t *testing.T) {
	c := newClinic(t)
	dataDir := t.TempDir()
	start := func(args ...string) *daemon {
		return startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), dataDir: dataDir, args: args})
	}
	checkpointOf := func(cpLine string) receipt.Checkpoint {
		env, err := receipt.ParseEnvelope([]byte(cpLine))
		if err != nil {
			t.Fatal(err)
		}
		var cp receipt.Checkpoint
		if err := json.Unmarshal(env.Payload, &cp); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	session := func(d *daemon, p string) {
		b := d.beginNamed(t, c, "clinic", p, "Follow-up")
		c.save(t, p, "Follow-up", 1)
		d.verify(t, b.SessionID)
	}

	// Every 3rd entry: begin, verify, receipt end on a signed seq 3.
	d := start("--ledger-checkpoint-every", "3", "--ledger-checkpoint-interval", "0")
	session(d, "p1")
	before := time.Now()
	_, _, cpLine := d.exportSigned(t)
	if cp := checkpointOf(cpLine); cp.Seq != 3 || !cp.At.Before(before) {
		t.Fatalf("export after 3 entries ends at %+v; want the checkpoint signed with entry 3, before the export (%s)", cp, before)
	}
	// One more Begin (seq 4), then SIGTERM: the daemon signs seq 4 on
	// its way out.
	d.beginNamed(t, c, "clinic", "p2", "Follow-up")
	d.stop()
	if !strings.Contains(d.logs(), "signed the ledger checkpoint") || !strings.Contains(d.logs(), "seq=4") {
		t.Fatalf("no checkpoint at shutdown:\n%s", d.logs())
	}
	stopped := time.Now()
	d = start("--ledger-checkpoint-every", "0", "--ledger-checkpoint-interval", "0")
	_, lines, cpLine := d.exportSigned(t)
	if cp := checkpointOf(cpLine); cp.Seq != 4 || len(lines) != 4 || !cp.At.Before(stopped) {
		t.Fatalf("after a restart the export ends at %+v; want the shutdown's checkpoint of seq 4", cp)
	}
	d.stop()

	// On the timer: a checkpoint of seq 7 is there before any export asks.
	d = start("--ledger-checkpoint-every", "0", "--ledger-checkpoint-interval", "300ms")
	b := d.beginNamed(t, c, "clinic", "p3", "Follow-up")
	c.save(t, "p3", "Follow-up", 1)
	rcpt := filepath.Join(t.TempDir(), "receipt.json")
	if out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", rcpt); code != 0 {
		t.Fatalf("verify: %d %s", code, out)
	}
	time.Sleep(1500 * time.Millisecond)
	before = time.Now()
	file, lines, cpLine := d.exportSigned(t)
	if cp := checkpointOf(cpLine); cp.Seq != 7 || len(lines) != 7 || !cp.At.Before(before) {
		t.Fatalf("the timer signed no checkpoint of seq 7 before the export: %+v", cp)
	}
	key, _ := d.keyFile(t)
	if r, code := d.offline(t, "ledger", "verify", "--file", file, "--public-key", key, "--receipt", rcpt); code != 0 || !r.SignedHeadVerified {
		t.Fatalf("ledger verify: exit %d %+v", code, r)
	}
}

// TestReceiptOfAnotherSession: a valid receipt is refused when the caller
// expected another session, deployment or step, naming the field.
func TestReceiptOfAnotherSession(t *testing.T) {
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, "")})
	key, _ := d.keyFile(t)
	dir := t.TempDir()
	var ids []string
	var receipts []string
	for _, p := range []string{"p1", "p2"} {
		b := d.beginNamed(t, c, "clinic", p, "Follow-up")
		c.save(t, p, "Follow-up", 1)
		rcpt := filepath.Join(dir, p+".json")
		if out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", rcpt); code != 0 {
			t.Fatalf("verify: %d %s", code, out)
		}
		ids, receipts = append(ids, b.SessionID), append(receipts, rcpt)
	}
	base := []string{"receipt", "verify", "--receipt", receipts[0], "--public-key", key}
	if r, code := d.offline(t, append(base, "--expect-session", ids[0], "--expect-deployment", "clinic")...); code != 0 || !r.Valid {
		t.Fatalf("the expected session: exit %d %+v", code, r)
	}
	for _, tc := range []struct {
		args          []string
		field, wanted string
	}{
		{[]string{"--expect-session", ids[1]}, "session", ids[1]},
		{[]string{"--expect-session", ids[0], "--expect-deployment", "billing"}, "deployment", "billing"},
		{[]string{"--expect-step", "save_triage"}, "step", "save_triage"},
	} {
		r, code := d.offline(t, append(base, tc.args...)...)
		if code != 1 || r.Valid || r.Mismatch == nil || r.Mismatch.Field != tc.field || r.Mismatch.Expected != tc.wanted || !strings.Contains(r.Reason, tc.field) {
			t.Errorf("%v: exit %d %+v, want exit 1 naming %s", tc.args, code, r, tc.field)
		}
	}
	if r, code := d.offline(t, append(base, "--expect-session", ids[1])...); r.Mismatch != nil && r.Mismatch.Found != ids[0] || code != 1 {
		t.Errorf("the mismatch names the receipt's own session: %+v", r)
	}
}

// TestLedgerStoreEditedBehindTheDaemon: an entry the daemon already signed
// a checkpoint of, edited in the store file while the daemon was down, is
// never signed over: the next export fails with DataLoss naming its seq,
// although the daemon chained its next entry onto the edited one.
func TestLedgerStoreEditedBehindTheDaemon(t *testing.T) {
	c := newClinic(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--ledger-checkpoint-every", "0", "--ledger-checkpoint-interval", "0"}
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), dataDir: dataDir, args: args})
	b := d.beginNamed(t, c, "clinic", "p1", "Follow-up")
	c.save(t, "p1", "Follow-up", 1)
	d.verify(t, b.SessionID)
	d.exportSigned(t) // signs the checkpoint of seq 3
	d.stop()

	db, err := bolt.Open(filepath.Join(dataDir, "verifierd.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("ledger"))
		k := binary.BigEndian.AppendUint64(nil, 3)
		var e receipt.Entry
		if err := json.Unmarshal(bk.Get(k), &e); err != nil {
			return err
		}
		e.Digest = "sha256:" + strings.Repeat("ab", 32)
		return bk.Put(k, e.Canonical())
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	d = startDaemon(t, daemonOpts{config: namedClinic(t, c, ""), dataDir: dataDir, args: args})
	d.beginNamed(t, c, "clinic", "p2", "Follow-up") // seq 4, chained onto the edited seq 3
	out, code := d.ctl(t, "ledger", "export")
	if code == 0 || !strings.Contains(out, "DataLoss") || !strings.Contains(out, "seq 3") || strings.Contains(out, receipt.PayloadTypeCheckpoint) {
		t.Fatalf("export of an edited store: exit %d %s, want DataLoss naming seq 3 and no checkpoint", code, out)
	}
}

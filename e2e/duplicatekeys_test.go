package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forgePayload writes env (an envelope's JSON) with a forged "payload"
// before the real one, spelled "Payload": Go's encoding/json reads the
// real one (the last, matched in any case), so the signature verifies as
// Go reads it, while jq and Python read the forged one.
func forgePayload(t *testing.T, env []byte, forged []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(compact(t, env), &m); err != nil || m["payload"] == nil {
		t.Fatalf("not an envelope: %v\n%s", err, env)
	}
	fake, _ := json.Marshal(base64.StdEncoding.EncodeToString(forged))
	return `{"payload":` + string(fake) + `,"payloadType":` + string(m["payloadType"]) + `,"Payload":` + string(m["payload"]) + `,"signatures":` + string(m["signatures"]) + `}`
}

// TestForgedDuplicateKeysRefused: a receipt and a ledger export the
// daemon issued pass `receipt verify` and `ledger verify`; the same with a
// key written twice in another case — a forged "payload" beside the signed
// "Payload", a forged "Digest" beside an entry's "digest", a forged
// checkpoint payload — are refused with exit 1, "valid": false and a
// reason naming the key and where it stands.
func TestForgedDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: namedClinic(t, c, "")})
	key, _ := d.keyFile(t)
	b := d.beginNamed(t, c, "clinic", "p-dup", "Follow-up")
	c.save(t, "p-dup", "Follow-up", 1)
	dir := t.TempDir()
	rcpt := filepath.Join(dir, "receipt.json")
	if out, code := d.ctl(t, "verify", "--session", b.SessionID, "--receipt-out", rcpt); code != 0 {
		t.Fatalf("verify exit %d: %s", code, out)
	}
	ledger, entries, checkpoint := d.exportSigned(t)
	d.stop()

	for _, ok := range [][]string{
		{"receipt", "verify", "--receipt", rcpt, "--public-key", key},
		{"ledger", "verify", "--file", ledger, "--public-key", key},
	} {
		if r, code := d.offline(t, ok...); code != 0 || !r.Valid {
			t.Fatalf("%v, as the daemon issued it: exit %d %+v", ok[:2], code, r)
		}
	}
	raw, err := os.ReadFile(rcpt)
	if err != nil {
		t.Fatal(err)
	}
	_, payload := decodePayload(t, rcpt)
	forgedRcpt := writeFile(t, dir, "forged.json", forgePayload(t, raw, bytes.Replace(payload, []byte(`"VERIFIED"`), []byte(`"FORGED"`), 1)))
	export := func(name string, lines ...string) string {
		return writeFile(t, dir, name, strings.Join(lines, "\n")+"\n")
	}
	last := len(entries) + 1
	forgedEntry := strings.Replace(entries[0], `"digest":`, `"digest":"sha256:forged","Digest":`, 1)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"receipt", []string{"receipt", "verify", "--receipt", forgedRcpt, "--public-key", key}, `the receipt file holds the key "payload" and "Payload"`},
		{"ledger entry", []string{"ledger", "verify", "--file", export("entry.jsonl", append([]string{forgedEntry}, append(entries[1:], checkpoint)...)...), "--public-key", key},
			`line 1 holds the key "digest" and "Digest"`},
		{"ledger entry, no key", []string{"ledger", "verify", "--file", export("entry-nokey.jsonl", append([]string{forgedEntry}, entries[1:]...)...)},
			`line 1 holds the key "digest" and "Digest"`},
		{"checkpoint", []string{"ledger", "verify", "--file", export("checkpoint.jsonl", append(entries, forgePayload(t, []byte(checkpoint), []byte(`{"seq":1}`)))...), "--public-key", key},
			"line " + strconv.Itoa(last) + ` holds the key "payload" and "Payload"`},
	} {
		r, code := d.offline(t, tc.args...)
		if code != 1 || r.Valid || !strings.Contains(r.Reason, tc.want) {
			t.Errorf("%s with a key twice: exit %d %+v, want exit 1 saying %s", tc.name, code, r, tc.want)
		}
	}
}

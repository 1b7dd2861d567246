package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/receipt"
)

func runCtl(t *testing.T, args ...string) (map[string]any, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, nil, &out, &errb)
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v: output is not JSON: %q (stderr %q)", args, out.String(), errb.String())
	}
	return m, code
}

func TestReceiptVerifyOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	payload, _ := json.Marshal(map[string]any{
		"outcome": "VERIFIED",
		"signer":  map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub), "key_id": receipt.KeyID(pub)},
	})
	env, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, payload))
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rc := write("receipt.json", env)
	key := write("key.json", []byte(`{"public_key": "`+base64.StdEncoding.EncodeToString(pub)+`", "key_id": "`+receipt.KeyID(pub)+`"}`))
	other := write("other.pub", []byte(base64.StdEncoding.EncodeToString(otherPub)+"\n"))
	wrapped := write("verify.json", []byte(`{"outcome": "VERIFIED", "receipt": `+string(env)+`}`))

	out, code := runCtl(t, "receipt", "verify", "--receipt", rc, "--public-key", key)
	if code != 0 || out["valid"] != true || out["payload"].(map[string]any)["outcome"] != "VERIFIED" {
		t.Fatalf("valid receipt: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", wrapped, "--key-id", receipt.KeyID(pub)); code != 0 || out["key_id"] != receipt.KeyID(pub) {
		t.Fatalf("by key id, from verify output: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", rc, "--public-key", other); code != 1 || out["valid"] != false {
		t.Fatalf("another daemon's key: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", rc, "--key-id", receipt.KeyID(otherPub)); code != 1 || !strings.Contains(out["reason"].(string), "signed by") {
		t.Fatalf("another key id: exit %d %v", code, out)
	}
	// One flipped byte of the payload (inside the base64) breaks it.
	var e receipt.Envelope
	_ = json.Unmarshal(env, &e)
	e.Payload[len(e.Payload)/2] ^= 1
	flipped, _ := json.Marshal(e)
	if out, code = runCtl(t, "receipt", "verify", "--receipt", write("flipped.json", flipped), "--public-key", key); code != 1 || out["valid"] != false {
		t.Fatalf("flipped payload: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", rc); code != 2 || out["error"] == nil {
		t.Fatalf("no key: exit %d %v", code, out)
	}
}

func TestLedgerVerifyOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	var entries []receipt.Entry
	prev := receipt.Genesis
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var rcptPayload []byte
	for i := 1; i <= 4; i++ {
		e := receipt.Entry{Seq: uint64(i), Prev: prev, Type: "begin", Session: "s", Digest: "sha256:00", At: at}
		if i == 3 {
			rcptPayload, _ = json.Marshal(map[string]any{"ledger": receipt.Position{Seq: 3, Head: prev}})
			e.Type, e.Digest = "receipt", receipt.PayloadDigest(rcptPayload)
		}
		entries = append(entries, e)
		prev = e.Hash()
	}
	lines := func(es []receipt.Entry) []byte {
		var b bytes.Buffer
		for _, e := range es {
			b.Write(e.Canonical())
			b.WriteByte('\n')
		}
		return b.Bytes()
	}
	good := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(good, lines(entries), 0o600); err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, rcptPayload))
	rc := filepath.Join(dir, "r.json")
	if err := os.WriteFile(rc, env, 0o600); err != nil {
		t.Fatal(err)
	}

	out, code := runCtl(t, "ledger", "verify", "--file", good, "--receipt", rc)
	if code != 0 || out["valid"] != true || out["entries"] != float64(4) || out["receipt_seq"] != float64(3) {
		t.Fatalf("good ledger: exit %d %v", code, out)
	}
	text := strings.Split(strings.TrimSpace(string(lines(entries))), "\n")
	for name, tc := range map[string]struct {
		lines []string
		seq   float64
	}{
		"deleted":   {[]string{text[0], text[2], text[3]}, 2},
		"reordered": {[]string{text[0], text[2], text[1], text[3]}, 2},
		"edited":    {[]string{text[0], strings.Replace(text[1], `"begin"`, `"verify"`, 1), text[2], text[3]}, 2},
	} {
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := runCtl(t, "ledger", "verify", "--file", p)
		if code != 1 || out["valid"] != false || out["seq"] != tc.seq {
			t.Errorf("%s: exit %d %v, want exit 1 naming seq %v", name, code, out, tc.seq)
		}
	}
	// A receipt that is not in this chain.
	otherPayload, _ := json.Marshal(map[string]any{"ledger": receipt.Position{Seq: 3, Head: receipt.Genesis}})
	otherEnv, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, otherPayload))
	orc := filepath.Join(dir, "other.json")
	if err := os.WriteFile(orc, otherEnv, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCtl(t, "ledger", "verify", "--file", good, "--receipt", orc); code != 1 || out["valid"] != false {
		t.Fatalf("foreign receipt: exit %d %v", code, out)
	}
	// A receipt recorded after the export's end: the export was cut.
	laterPayload, _ := json.Marshal(map[string]any{"ledger": receipt.Position{Seq: 9, Head: "sha256:00"}})
	laterEnv, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, laterPayload))
	lrc := filepath.Join(dir, "later.json")
	if err := os.WriteFile(lrc, laterEnv, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCtl(t, "ledger", "verify", "--file", good, "--receipt", lrc); code != 1 || out["tampering"] != "truncated" || out["seq"] != float64(5) {
		t.Fatalf("a later receipt: exit %d %v", code, out)
	}
}

// TestLedgerVerifySigned: with the daemon's key, an export must end exactly
// at its signed checkpoint; each way of cutting, extending or rewriting the
// tail is named with its seq, while the chain-only check (no key) passes
// them and says that it checked the chain only.
func TestLedgerVerifySigned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	mk := func(n int, edit func([]receipt.Entry)) []receipt.Entry {
		es := make([]receipt.Entry, n)
		prev := receipt.Genesis
		for i := range es {
			es[i] = receipt.Entry{Seq: uint64(i + 1), Prev: prev, Type: "begin", Session: "s", Digest: "sha256:00", At: at}
			if edit != nil {
				edit(es[:i+1])
			}
			prev = es[i].Hash()
		}
		return es
	}
	good := mk(4, nil)
	cp, err := receipt.SignCheckpoint(priv, 4, good[3].Hash(), at)
	if err != nil {
		t.Fatal(err)
	}
	cpLine, _ := json.Marshal(cp)
	write := func(name string, es []receipt.Entry, checkpoint bool) string {
		var b bytes.Buffer
		for _, e := range es {
			b.Write(e.Canonical())
			b.WriteByte('\n')
		}
		if checkpoint {
			b.Write(cpLine)
			b.WriteByte('\n')
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := filepath.Join(dir, "key.json")
	if err := os.WriteFile(key, []byte(`{"public_key": "`+base64.StdEncoding.EncodeToString(pub)+`", "key_id": "`+receipt.KeyID(pub)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	honest := write("honest.jsonl", good, true)
	for _, keyArgs := range [][]string{{"--public-key", key}, {"--key-id", receipt.KeyID(pub)}} {
		out, code := runCtl(t, append([]string{"ledger", "verify", "--file", honest}, keyArgs...)...)
		if code != 0 || out["valid"] != true || out["valid_chain"] != true || out["signed_head_verified"] != true || out["checkpoint"].(map[string]any)["seq"] != float64(4) {
			t.Fatalf("honest export %v: exit %d %v", keyArgs, code, out)
		}
	}
	if out, code := runCtl(t, "ledger", "verify", "--file", honest); code != 0 || out["valid_chain"] != true || out["signed_head_verified"] != false || !strings.Contains(out["note"].(string), "only the chain") {
		t.Fatalf("without a key: exit %d %v", code, out)
	}

	editLast := mk(4, nil)
	editLast[3].Digest = "sha256:ff"
	for _, tc := range []struct {
		name, file, kind string
		seq              float64
	}{
		{"last lines dropped", write("dropped.jsonl", good[:2], true), "truncated", 3},
		{"no checkpoint", write("nocp.jsonl", good, false), "truncated", 5},
		{"last line edited", write("edited.jsonl", editLast, true), "rewritten", 4},
		{"forged entry appended", write("extended.jsonl", mk(5, nil), true), "extended", 5},
		{"re-chained after an edit", write("rechained.jsonl", mk(4, func(es []receipt.Entry) {
			if len(es) == 2 {
				es[1].Session = "forged"
			}
		}), true), "rewritten", 4},
	} {
		for _, keyArgs := range [][]string{{"--public-key", key}, {"--key-id", receipt.KeyID(pub)}} {
			out, code := runCtl(t, append([]string{"ledger", "verify", "--file", tc.file}, keyArgs...)...)
			if code != 1 || out["valid"] != false || out["tampering"] != tc.kind || out["seq"] != tc.seq || out["signed_head_verified"] != false {
				t.Errorf("%s %v: exit %d %v, want exit 1, %s at seq %v", tc.name, keyArgs[0], code, out, tc.kind, tc.seq)
			}
		}
		// The chain alone holds in every case: only the key sees it.
		if out, code := runCtl(t, "ledger", "verify", "--file", tc.file); code != 0 || out["signed_head_verified"] != false {
			t.Errorf("%s without a key: exit %d %v", tc.name, code, out)
		}
	}
	// A broken chain is a rewrite, named with its seq, key or not.
	broken := write("broken.jsonl", []receipt.Entry{good[0], good[2], good[3]}, true)
	if out, code := runCtl(t, "ledger", "verify", "--file", broken, "--public-key", key); code != 1 || out["tampering"] != "rewritten" || out["valid_chain"] != false || out["seq"] != float64(2) {
		t.Errorf("deleted middle line: exit %d %v", code, out)
	}
	if out, code := runCtl(t, "ledger", "verify", "--file", honest, "--public-key", key, "--key-id", receipt.KeyID(pub)); code != 2 || out["error"] == nil {
		t.Errorf("both key flags: exit %d %v", code, out)
	}
}

// TestReceiptVerifyExpect: a valid receipt of another session, deployment
// or step fails with the field named.
func TestReceiptVerifyExpect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	payload, _ := json.Marshal(map[string]any{
		"kind": "verify", "session_id": "ses_a",
		"deployment": map[string]any{"name": "clinic", "digest": "sha256:1"},
		"workflow":   map[string]any{"name": "triage", "digest": "sha256:2", "step": "save_triage"},
		"signer":     map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub), "key_id": receipt.KeyID(pub)},
	})
	env, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, payload))
	rc := filepath.Join(dir, "receipt.json")
	if err := os.WriteFile(rc, env, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"receipt", "verify", "--receipt", rc, "--key-id", receipt.KeyID(pub)}
	if out, code := runCtl(t, append(base, "--expect-session", "ses_a", "--expect-deployment", "clinic", "--expect-step", "save_triage")...); code != 0 || out["valid"] != true {
		t.Fatalf("the expected subject: exit %d %v", code, out)
	}
	for _, tc := range []struct {
		args  []string
		field string
	}{
		{[]string{"--expect-session", "ses_b"}, "session"},
		{[]string{"--expect-session", "ses_a", "--expect-deployment", "billing"}, "deployment"},
		{[]string{"--expect-step", "send_invoice"}, "step"},
	} {
		out, code := runCtl(t, append(base, tc.args...)...)
		m, _ := out["mismatch"].(map[string]any)
		if code != 1 || out["valid"] != false || out["signature_valid"] != true || m["field"] != tc.field || !strings.Contains(out["reason"].(string), tc.field) {
			t.Errorf("%v: exit %d %v, want exit 1 naming %s", tc.args, code, out, tc.field)
		}
	}
}

// A receipt or a ledger export holding a key twice (in any case: a forged
// "payload" beside the signed "Payload", a forged "Digest" beside an
// entry's "digest") is invalid: exit 1, naming the key, though the
// signatures verify as Go alone would read them.
func TestVerifyRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := write("key.json", `{"public_key": "`+base64.StdEncoding.EncodeToString(pub)+`"}`)
	env, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, []byte(`{"outcome":"VERIFIED"}`)))
	forgedPayload := base64.StdEncoding.EncodeToString([]byte(`{"outcome":"REFUTED"}`))
	forged := strings.Replace(string(env), `"payload":`, `"payload":"`+forgedPayload+`","Payload":`, 1)
	dupSigned, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, []byte(`{"outcome":"REFUTED","Outcome":"VERIFIED"}`)))
	for name, rc := range map[string]string{
		"envelope":       forged,
		"signed payload": string(dupSigned),
		"verify output":  `{"receipt": ` + string(env) + `, "Receipt": ` + forged + `}`,
	} {
		out, code := runCtl(t, "receipt", "verify", "--receipt", write(strings.ReplaceAll(name, " ", "_")+".json", rc), "--public-key", key)
		if reason, _ := out["reason"].(string); code != 1 || out["valid"] != false || !strings.Contains(reason, "holds the key") {
			t.Errorf("receipt verify, %s with a key twice: exit %d %v", name, code, out)
		}
	}
	if out, code := runCtl(t, "receipt", "verify", "--receipt", write("honest.json", string(env)), "--public-key", key); code != 0 {
		t.Fatalf("the honest receipt: exit %d %v", code, out)
	}

	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	e := receipt.Entry{Seq: 1, Prev: receipt.Genesis, Type: "begin", Session: "s", Digest: "sha256:00", At: at}
	cp, err := receipt.SignCheckpoint(priv, 1, e.Hash(), at)
	if err != nil {
		t.Fatal(err)
	}
	cpLine, _ := json.Marshal(cp)
	entry := string(e.Canonical())
	for name, export := range map[string]string{
		"entry":      strings.Replace(entry, `"digest":`, `"digest":"sha256:forged","Digest":`, 1) + "\n" + string(cpLine) + "\n",
		"checkpoint": entry + "\n" + strings.Replace(string(cpLine), `"payload":`, `"payload":"e30=","Payload":`, 1) + "\n",
	} {
		for _, args := range [][]string{{}, {"--public-key", key}} {
			out, code := runCtl(t, append([]string{"ledger", "verify", "--file", write("ledger-"+name+".jsonl", export)}, args...)...)
			if reason, _ := out["reason"].(string); code != 1 || out["valid"] != false || !strings.Contains(reason, "holds the key") {
				t.Errorf("ledger verify %v, %s with a key twice: exit %d %v", args, name, code, out)
			}
		}
	}
	if out, code := runCtl(t, "ledger", "verify", "--file", write("honest.jsonl", entry+"\n"+string(cpLine)+"\n"), "--public-key", key); code != 0 {
		t.Fatalf("the honest export: exit %d %v", code, out)
	}
}

// A refused Begin's receipt names its deployment and step, but nothing was
// verified: --expect-* refuses it (exit 1, field "kind") unless
// --accept-refusal; without an expectation it is a valid signed receipt.
func TestReceiptVerifyExpectRefusal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	payload, _ := json.Marshal(map[string]any{
		"kind":       "begin_refused",
		"deployment": map[string]any{"name": "clinic", "digest": "sha256:1"},
		"workflow":   map[string]any{"name": "triage", "step": "save_triage"},
		"refusal":    map[string]any{"code": "newness_unproven", "path": "effects[0]"},
	})
	env, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, payload))
	rc := filepath.Join(dir, "refusal.json")
	keyFile := filepath.Join(dir, "key.json")
	if err := os.WriteFile(rc, env, 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := json.Marshal(map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub), "key_id": receipt.KeyID(pub)})
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"receipt", "verify", "--receipt", rc, "--public-key", keyFile}
	for _, expect := range [][]string{
		{"--expect-deployment", "clinic"},
		{"--expect-step", "save_triage"},
		{"--expect-deployment", "clinic", "--expect-step", "save_triage"},
	} {
		out, code := runCtl(t, append(base, expect...)...)
		m, _ := out["mismatch"].(map[string]any)
		if code != 1 || out["valid"] != false || m["field"] != "kind" || !strings.Contains(out["reason"].(string), "refused Begin") {
			t.Errorf("%v on a refusal receipt: exit %d %v; want exit 1, mismatch kind", expect, code, out)
		}
		if out, code := runCtl(t, append(append(base, expect...), "--accept-refusal")...); code != 0 || out["valid"] != true {
			t.Errorf("%v --accept-refusal: exit %d %v; want 0", expect, code, out)
		}
	}
	if out, code := runCtl(t, base...); code != 0 || out["valid"] != true {
		t.Errorf("no expectation: exit %d %v; want a valid signed receipt", code, out)
	}
}

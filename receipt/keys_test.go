package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// CheckKeys refuses a key written twice in one object, at any depth, in
// any case (the Kelvin sign folding to k as encoding/json folds it), and
// names the object; the same key in two objects, and text that is not
// JSON, are not its concern.
func TestCheckKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc, path, first, again string // path "": accepted
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, "", "", ""},
		{`not json {"a":1,"a":2`, "", "", ""},
		{`{"payload":"x","payload":"y"}`, "$", "payload", "payload"},
		{`{"payload":"x","Payload":"y"}`, "$", "payload", "Payload"},
		{`{"signatures":[{"keyid":"a","sig":"b"},{"keyid":"a","KEYID":"c"}]}`, "$.signatures[1]", "keyid", "KEYID"},
		{`{"a":{"b":[1,[2,{"kind":1,"\u212Aind":2}]]}}`, "$.a.b[1][1]", "kind", "\u212aind"},
		{`[{"x":1},{"y":{"z":1,"Z":2}}]`, "$[1].y", "z", "Z"},
	} {
		err := CheckKeys([]byte(tc.doc), "the test")
		if tc.path == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.doc, err)
			}
			continue
		}
		de, ok := errors.AsType[*DuplicateKeyError](err)
		if !ok || de.Path != tc.path || de.First != tc.first || de.Again != tc.again || !strings.HasPrefix(err.Error(), "the test holds the key") {
			t.Errorf("%s: %v, want a duplicate %q/%q at %s", tc.doc, err, tc.first, tc.again, tc.path)
		}
	}
}

// forge puts a forged "payload" before the real one spelled "Payload":
// encoding/json reads the real one (the last, matched in any case), jq and
// Python the forged one.
func forge(t *testing.T, env []byte, forged []byte) []byte {
	t.Helper()
	out := bytes.Replace(env, []byte(`"payload":`), []byte(`"payload":"`+base64.StdEncoding.EncodeToString(forged)+`","Payload":`), 1)
	if bytes.Equal(out, env) {
		t.Fatal("no payload key to forge")
	}
	return out
}

// A receipt whose envelope or signed payload holds a key twice is refused
// by ParseEnvelope, Open, OpenExpecting, OpenRun, CheckSubject and
// FindReceipt, though its signature verifies.
func TestForgedDuplicateReceiptRefused(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	signedPayload := []byte(`{"outcome":"VERIFIED","session_id":"ses_1","ledger":{"seq":1,"head":"h"}}`)
	env, _ := json.Marshal(Sign(priv, PayloadTypeVerdict, signedPayload))
	forged := forge(t, env, []byte(`{"outcome":"REFUTED"}`))
	// The premise: Go alone would take the real, signed payload.
	var naive Envelope
	if err := json.Unmarshal(forged, &naive); err != nil || !bytes.Equal(naive.Payload, signedPayload) {
		t.Fatalf("encoding/json reads %q %v", naive.Payload, err)
	}
	if _, err := naive.Open(pub); err != nil {
		t.Fatalf("the forged envelope's signature should verify as Go reads it: %v", err)
	}
	_, err := ParseEnvelope(forged)
	if de, ok := errors.AsType[*DuplicateKeyError](err); !ok || de.What != "the envelope" || de.Path != "$" || de.Again != "Payload" {
		t.Errorf("ParseEnvelope(forged envelope) = %v, want a duplicate Payload", err)
	}

	// Signed payloads with a key twice, at the top and deep.
	for _, p := range []string{
		`{"outcome":"REFUTED","Outcome":"VERIFIED","session_id":"ses_1"}`,
		`{"run_id":"run_1","workflow":{"step":"a","STEP":"b"},"ledger":{"seq":1,"head":"h"}}`,
	} {
		signed := Sign(priv, PayloadTypeRun, []byte(p))
		raw, _ := json.Marshal(signed)
		for name, err := range map[string]error{
			"ParseEnvelope": second(ParseEnvelope(raw)),
			"Open":          second(signed.Open(pub)),
			"OpenExpecting": second(signed.OpenExpecting(pub, Expect{Session: "ses_1"})),
			"OpenRun":       second(signed.OpenRun(pub, "")),
			"CheckSubject":  CheckSubject([]byte(p), Expect{Session: "ses_1"}),
			"FindReceipt":   second(FindReceipt(chain(1), []byte(p))),
		} {
			if _, ok := errors.AsType[*DuplicateKeyError](err); !ok {
				t.Errorf("%s of %s: %v, want a *DuplicateKeyError", name, p, err)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }

// An export with a ledger line or a checkpoint (its envelope or its signed
// payload) holding a key twice is refused by ReadExport, naming the line;
// CheckpointSignerKey refuses such a payload too.
func TestForgedDuplicateLedgerRefused(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	good := chain(2)
	cp, err := SignCheckpoint(priv, 2, good[1].Hash(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cpLine, _ := json.Marshal(cp)
	dupPayload := Sign(priv, PayloadTypeCheckpoint, []byte(`{"seq":2,"head":"`+good[1].Hash()+`","Head":"sha256:forged"}`))
	dupPayloadLine, _ := json.Marshal(dupPayload)
	line2 := string(good[1].Canonical())
	for name, tc := range map[string]struct {
		lines []string
		what  string
	}{
		"entry, a key in another case": {[]string{string(good[0].Canonical()), strings.Replace(line2, `"digest":`, `"digest":"sha256:forged","Digest":`, 1), string(cpLine)}, "line 2"},
		"entry, a key twice":           {[]string{string(good[0].Canonical()), strings.Replace(line2, `"seq":2`, `"seq":3,"seq":2`, 1), string(cpLine)}, "line 2"},
		"checkpoint envelope":          {[]string{string(good[0].Canonical()), line2, string(forge(t, cpLine, []byte(`{"seq":9}`)))}, "line 3"},
		"checkpoint payload":           {[]string{string(good[0].Canonical()), line2, string(dupPayloadLine)}, "line 3: the envelope's payload"},
	} {
		_, err := ReadExport(strings.NewReader(strings.Join(tc.lines, "\n") + "\n"))
		if de, ok := errors.AsType[*DuplicateKeyError](err); !ok || !strings.HasPrefix(de.What, tc.what) {
			t.Errorf("%s: %v, want a *DuplicateKeyError of %s", name, err, tc.what)
		}
	}
	if _, err := ReadExport(strings.NewReader(string(good[0].Canonical()) + "\n" + line2 + "\n" + string(cpLine) + "\n")); err != nil {
		t.Fatalf("the honest export: %v", err)
	}
	if _, err := CheckpointSignerKey(dupPayload, KeyID(priv.Public().(ed25519.PublicKey))); !isDup(err) {
		t.Errorf("CheckpointSignerKey of a payload with a key twice: %v", err)
	}
}

func isDup(err error) bool { _, ok := errors.AsType[*DuplicateKeyError](err); return ok }

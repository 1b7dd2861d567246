package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// export writes entries and a checkpoint of the last of them as
// `verifyctl ledger export` does, and reads it back.
func export(t *testing.T, priv ed25519.PrivateKey, entries []Entry, cpSeq uint64, cpHead string) *Export {
	t.Helper()
	var b bytes.Buffer
	for _, e := range entries {
		b.Write(e.Canonical())
		b.WriteByte('\n')
	}
	env, err := SignCheckpoint(priv, cpSeq, cpHead, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	b.Write(raw)
	b.WriteByte('\n')
	x, err := ReadExport(&b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestVerifySigned(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	good := chain(5)
	x := export(t, priv, good, 5, good[4].Hash())
	if len(x.Entries) != 5 || len(x.Checkpoints) != 1 || x.Lines[0] != 6 {
		t.Fatalf("read %d entries, %d checkpoints at %v", len(x.Entries), len(x.Checkpoints), x.Lines)
	}
	if cp, err := VerifySigned(x, pub); err != nil || cp.Seq != 5 || cp.Signer.KeyID != KeyID(pub) {
		t.Fatalf("honest export: %+v %v", cp, err)
	}
	if entries, err := ReadEntries(bytes.NewReader(nil)); err != nil || len(entries) != 0 {
		t.Fatalf("empty: %v %v", entries, err)
	}
	// An empty ledger's checkpoint is seq 0 at the genesis digest.
	if _, err := VerifySigned(export(t, priv, nil, 0, Genesis), pub); err != nil {
		t.Errorf("empty ledger: %v", err)
	}

	forged := chain(6) // seq 6 chained correctly onto seq 5
	edited := chain(5)
	edited[4].Session = "forged"
	rechained := chain(5)
	rechained[2].Session = "forged"
	for i := 3; i < 5; i++ {
		rechained[i].Prev = rechained[i-1].Hash()
	}
	for name, tc := range map[string]struct {
		x       *Export
		pub     ed25519.PublicKey
		kind    string
		wantSeq uint64
	}{
		"last lines dropped":    {export(t, priv, good[:3], 5, good[4].Hash()), pub, Truncated, 4},
		"no checkpoint":         {&Export{Entries: good}, pub, Truncated, 6},
		"another key":           {x, otherPub, Truncated, 6},
		"forged entry after":    {export(t, priv, forged, 5, good[4].Hash()), pub, Extended, 6},
		"last line edited":      {export(t, priv, edited, 5, good[4].Hash()), pub, Rewritten, 5},
		"re-chained after edit": {export(t, priv, rechained, 5, good[4].Hash()), pub, Rewritten, 5},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name != "last line edited" {
				if _, err := VerifyChain(tc.x.Entries, false); err != nil {
					t.Fatalf("the chain itself should hold: %v", err)
				}
			}
			_, err := VerifySigned(tc.x, tc.pub)
			var le *LedgerError
			if !errors.As(err, &le) || le.Kind != tc.kind || le.Seq != tc.wantSeq {
				t.Fatalf("err %v, want %s at seq %d", err, tc.kind, tc.wantSeq)
			}
		})
	}

	// A changed checkpoint payload no longer verifies.
	bad := export(t, priv, good, 5, good[4].Hash())
	bad.Checkpoints[0].Payload = bytes.Replace(bad.Checkpoints[0].Payload, []byte(`"seq":5`), []byte(`"seq":4`), 1)
	if _, err := VerifySigned(bad, pub); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("edited checkpoint: %v", err)
	}
	// --key-id: the key is taken from the payload and must hash to the id.
	if k, err := CheckpointSignerKey(x.Checkpoints[0], KeyID(pub)); err != nil || !k.Equal(pub) {
		t.Errorf("CheckpointSignerKey: %v", err)
	}
	if _, err := CheckpointSignerKey(x.Checkpoints[0], KeyID(otherPub)); err == nil {
		t.Error("a checkpoint by another key matched the trusted id")
	}
	// Another envelope type is not a checkpoint.
	v, _ := json.Marshal(Sign(priv, PayloadTypeVerdict, []byte(`{}`)))
	if _, err := ReadExport(bytes.NewReader(v)); err == nil || !strings.Contains(err.Error(), "not a ledger checkpoint") {
		t.Errorf("verdict envelope in an export: %v", err)
	}
}

func TestCheckSubject(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	payload := []byte(`{"kind":"verify","session_id":"ses_a","deployment":{"name":"clinic","digest":"sha256:1"},"workflow":{"name":"triage","digest":"sha256:2","step":"save_triage"}}`)
	env := Sign(priv, PayloadTypeVerdict, payload)
	if _, err := env.OpenExpecting(pub, Expect{Session: "ses_a", Deployment: "clinic", Step: "save_triage"}); err != nil {
		t.Fatalf("matching subject: %v", err)
	}
	if err := CheckSubject(payload, Expect{}); err != nil {
		t.Fatalf("nothing expected: %v", err)
	}
	for _, tc := range []struct {
		want  Expect
		field string
	}{
		{Expect{Session: "ses_b"}, "session"},
		{Expect{Session: "ses_a", Deployment: "billing"}, "deployment"},
		{Expect{Step: "other_step"}, "step"},
	} {
		_, err := env.OpenExpecting(pub, tc.want)
		var se *SubjectError
		if !errors.As(err, &se) || se.Field != tc.field || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want a SubjectError on %s", tc.want, err, tc.field)
		}
	}
	// Other payloads (a reward receipt) name the deployment plainly; with
	// nothing expected, any payload passes.
	if err := CheckSubject([]byte(`{"deployment":"mockmed","receipt_id":"r1"}`), Expect{Deployment: "mockmed"}); err != nil {
		t.Errorf("a plain deployment name: %v", err)
	}
	if err := CheckSubject([]byte(`{"deployment":"mockmed"}`), Expect{}); err != nil {
		t.Errorf("nothing expected of a reward receipt: %v", err)
	}
	// A receipt without a workflow has no step to match.
	if err := CheckSubject([]byte(`{"session_id":"ses_a","deployment":{"name":"x"}}`), Expect{Step: "s"}); err == nil {
		t.Error("a step matched a receipt of no workflow")
	}
}

package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPAE(t *testing.T) {
	t.Parallel()
	// The DSSE specification's worked example.
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
}

func TestEnvelopeRoundTripAndTampering(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	env := Sign(priv, PayloadTypeVerdict, []byte(`{"outcome":"VERIFIED"}`))
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := back.Open(pub); err != nil || string(p) != `{"outcome":"VERIFIED"}` {
		t.Fatalf("Open = %q, %v", p, err)
	}
	if env.Signatures[0].KeyID != KeyID(pub) {
		t.Fatalf("keyid %s, want %s", env.Signatures[0].KeyID, KeyID(pub))
	}

	flipped := *back
	flipped.Payload = bytes.Replace(back.Payload, []byte("VERIFIED"), []byte("VERIFIEE"), 1)
	if _, err := flipped.Open(pub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("flipped payload: %v, want ErrBadSignature", err)
	}
	retyped := *back
	retyped.PayloadType = PayloadTypeArtifact
	if _, err := retyped.Open(pub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("changed type: %v, want ErrBadSignature", err)
	}
	swapped := *back
	other := Sign(otherPriv, PayloadTypeVerdict, back.Payload)
	swapped.Signatures = []Signature{{KeyID: KeyID(pub), Sig: other.Signatures[0].Sig}}
	if _, err := swapped.Open(pub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("swapped signature: %v, want ErrBadSignature", err)
	}
	if _, err := back.Open(otherPub); !errors.Is(err, ErrNoSignature) {
		t.Errorf("another key: %v, want ErrNoSignature", err)
	}
}

func chain(n int) []Entry {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	out := make([]Entry, n)
	prev := Genesis
	for i := range out {
		out[i] = Entry{Seq: uint64(i + 1), Prev: prev, Type: "verify", Session: fmt.Sprintf("s%d", i), Digest: "sha256:ab", At: at.Add(time.Duration(i) * time.Second)}
		prev = out[i].Hash()
	}
	return out
}

func TestVerifyChain(t *testing.T) {
	t.Parallel()
	good := chain(5)
	head, err := VerifyChain(good, false)
	if err != nil || head != good[4].Hash() {
		t.Fatalf("good chain: %s, %v", head, err)
	}
	for name, tc := range map[string]struct {
		edit    func([]Entry) []Entry
		wantSeq uint64
	}{
		"changed":   {func(e []Entry) []Entry { e[2].Session = "other"; return e }, 3},
		"deleted":   {func(e []Entry) []Entry { return append(e[:1], e[2:]...) }, 2},
		"reordered": {func(e []Entry) []Entry { e[1], e[2] = e[2], e[1]; return e }, 2},
		"inserted": {func(e []Entry) []Entry {
			x := e[1]
			return append(e[:2], append([]Entry{x}, e[2:]...)...)
		}, 3},
		"first deleted": {func(e []Entry) []Entry { return e[1:] }, 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := VerifyChain(tc.edit(chain(5)), false)
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Seq != tc.wantSeq {
				t.Fatalf("err %v, want a ChainError at seq %d", err, tc.wantSeq)
			}
		})
	}
}

func TestCanonicalIsSortedCompact(t *testing.T) {
	t.Parallel()
	e := Entry{Seq: 7, Prev: Genesis, Type: "begin", Session: "<s&1>", Digest: "sha256:00", At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))}
	want := `{"at":"2026-01-02T02:04:05.000000006Z","digest":"sha256:00","prev":"` + Genesis + `","seq":7,"session":"<s&1>","type":"begin"}`
	if got := string(e.Canonical()); got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	lines, err := ReadEntries(bytes.NewReader([]byte(want + "\n\n")))
	if err != nil || len(lines) != 1 || lines[0].Hash() != e.Hash() {
		t.Fatalf("ReadEntries: %+v %v", lines, err)
	}
	if _, err := ReadEntries(bytes.NewReader([]byte(`{"seq":1,"extra":true}`))); err == nil {
		t.Fatal("unknown key accepted")
	}
}

// TestRefusalClaimJSON: the refusal claim of a refused Begin's receipt keeps
// its signed JSON form: path and code only when set, the message only as
// its digest.
func TestRefusalClaimJSON(t *testing.T) {
	for _, tc := range []struct {
		claim RefusalClaim
		want  string
	}{
		{RefusalClaim{Path: "effects[0]", Code: "newness_unproven", MessageDigest: "hmac-sha256:ab"}, `{"path":"effects[0]","code":"newness_unproven","message_digest":"hmac-sha256:ab"}`},
		{RefusalClaim{MessageDigest: "hmac-sha256:ab"}, `{"message_digest":"hmac-sha256:ab"}`},
	} {
		b, err := json.Marshal(tc.claim)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s, %v; want %s", tc.claim, b, err, tc.want)
		}
	}
}

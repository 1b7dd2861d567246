package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture reads an envelope under testdata/ and the key that signed it.
// The fixtures were issued by the daemon's payload types before they moved
// into this package: their payloads are the bytes an older daemon signed.
func fixture(t *testing.T, name string) (*Envelope, ed25519.PublicKey) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	env, err := ParseEnvelope(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	key, err := os.ReadFile(filepath.Join("testdata", "public-key.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(strings.TrimSpace(string(key)))
	if err != nil {
		t.Fatal(err)
	}
	return env, pub
}

// TestPayloadsReencodeOldReceipts decodes receipts issued before the
// payload types moved here into the typed payloads and re-encodes them:
// the bytes must be the signed ones, field for field and in order.
func TestPayloadsReencodeOldReceipts(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*Envelope, ed25519.PublicKey) (any, error){
		"verdict-v1.json": func(e *Envelope, k ed25519.PublicKey) (any, error) { return e.OpenVerdict(k, Expect{}) },
		"verdict-refused-v1.json": func(e *Envelope, k ed25519.PublicKey) (any, error) {
			return e.OpenVerdict(k, Expect{AcceptRefusal: true})
		},
		"artifact-v1.json":                func(e *Envelope, k ed25519.PublicKey) (any, error) { return e.OpenArtifact(k) },
		"reward-receipt-v1.json":          func(e *Envelope, k ed25519.PublicKey) (any, error) { return e.OpenRewardReceipt(k) },
		"reward-receipt-unscored-v1.json": func(e *Envelope, k ed25519.PublicKey) (any, error) { return e.OpenRewardReceipt(k) },
		"reward-certificate-v1.json":      func(e *Envelope, k ed25519.PublicKey) (any, error) { return e.OpenRewardCertificate(k) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env, pub := fixture(t, name)
			p, err := open(env, pub)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			again, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, env.Payload) {
				t.Fatalf("re-encoded payload differs from the signed one:\n got %s\nwant %s", again, env.Payload)
			}
		})
	}
}

// TestOpenVerdictFields reads the fields of an old verdict receipt through
// the typed payload, nested ones included.
func TestOpenVerdictFields(t *testing.T) {
	t.Parallel()
	env, pub := fixture(t, "verdict-v1.json")
	p, err := env.OpenVerdict(pub, Expect{Session: "ses_0123456789abcdef", Deployment: "crm", Step: "create"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != KindReverify || p.Attempt != 1 || len(p.Effects) != 2 || p.Signer.KeyID != KeyID(pub) || p.Ledger.Seq != 42 {
		t.Fatalf("payload = %+v", p)
	}
	ws := p.Effects[0].WriteSet
	if ws == nil || ws.Changes != 3 || ws.Complete || !ws.Reachable || ws.To != "0/16B37F0" {
		t.Errorf("write set = %+v", ws)
	}
	if p.Effects[0].ObservedCount == nil || *p.Effects[0].ObservedCount != 2 || p.Effects[1].ObservedCount != nil {
		t.Errorf("observed counts = %v, %v", p.Effects[0].ObservedCount, p.Effects[1].ObservedCount)
	}
	if p.Run == nil || len(p.Run.Handoffs) != 1 || len(p.Run.Consumed) != 1 || p.Run.Consumed[0].Size != 12 {
		t.Errorf("run = %+v", p.Run)
	}
	if len(p.Census) != 2 || p.Census[0] == nil || p.Census[0].After.Records != 10 || p.Census[1] != nil {
		t.Errorf("census = %+v", p.Census)
	}
}

// TestOpenTypedPayloadsRefuse: each opener refuses another payload type, a
// key that did not sign, and (OpenVerdict) a receipt about another
// subject or a refusal it was not told to accept.
func TestOpenTypedPayloadsRefuse(t *testing.T) {
	t.Parallel()
	env, pub := fixture(t, "verdict-v1.json")
	var se *SubjectError
	if _, err := env.OpenVerdict(pub, Expect{Session: "ses_other"}); !errors.As(err, &se) || se.Field != "session" {
		t.Errorf("another session: %v, want a SubjectError on session", err)
	}
	refused, _ := fixture(t, "verdict-refused-v1.json")
	if _, err := refused.OpenVerdict(pub, Expect{Deployment: ""}); err != nil {
		t.Errorf("no expectation: %v", err)
	}
	if _, err := refused.OpenVerdict(pub, Expect{Step: "create"}); !errors.As(err, &se) || se.Field != "kind" {
		t.Errorf("a refusal not accepted: %v, want a SubjectError on kind", err)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := env.OpenVerdict(other, Expect{}); !errors.Is(err, ErrNoSignature) {
		t.Errorf("another key: %v, want ErrNoSignature", err)
	}
	// The same key's signature over another payload type is not the
	// payload the opener reads, whatever the payload holds.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	pub2 := priv.Public().(ed25519.PublicKey)
	cases := []struct {
		typ  string
		open func(*Envelope) error
		want string
	}{
		{PayloadTypeArtifact, func(e *Envelope) error { _, err := e.OpenVerdict(pub2, Expect{}); return err }, PayloadTypeVerdict},
		{PayloadTypeVerdict, func(e *Envelope) error { _, err := e.OpenArtifact(pub2); return err }, PayloadTypeArtifact},
		{PayloadTypeRewardCertificate, func(e *Envelope) error { _, err := e.OpenRewardReceipt(pub2); return err }, PayloadTypeRewardReceipt},
		{PayloadTypeRewardReceipt, func(e *Envelope) error { _, err := e.OpenRewardCertificate(pub2); return err }, PayloadTypeRewardCertificate},
	}
	for _, c := range cases {
		err := c.open(Sign(priv, c.typ, env.Payload))
		var te *PayloadTypeError
		if !errors.As(err, &te) || te.Got != c.typ || te.Want != c.want {
			t.Errorf("%s opened as %s: %v, want a PayloadTypeError", c.typ, c.want, err)
		}
	}
	if _, err := Sign(priv, PayloadTypeVerdict, []byte(`{"kind":""}`)).OpenVerdict(pub2, Expect{}); err == nil {
		t.Error("a verdict payload without a kind opened")
	}
	if _, err := Sign(priv, PayloadTypeArtifact, []byte(`[]`)).OpenArtifact(pub2); err == nil || !strings.Contains(err.Error(), "not an artifact verification receipt") {
		t.Errorf("a payload that is not an object: %v", err)
	}
}

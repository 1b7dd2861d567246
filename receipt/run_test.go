package receipt

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
)

func TestOpenRun(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	payload, err := json.Marshal(RunPayload{Kind: "run_finish", RunID: "run-1", Outcome: "VERIFIED", Attempt: 1, RunMinTier: 2})
	if err != nil {
		t.Fatal(err)
	}
	env := Sign(priv, PayloadTypeRun, payload)
	p, err := env.OpenRun(pub, "run-1")
	if err != nil {
		t.Fatalf("OpenRun: %v", err)
	}
	if p.RunID != "run-1" || p.Outcome != "VERIFIED" || p.Attempt != 1 || p.RunMinTier != 2 {
		t.Fatalf("payload = %+v", p)
	}
	if _, err := env.OpenRun(pub, ""); err != nil {
		t.Errorf("no expected run: %v", err)
	}
	var se *SubjectError
	if _, err := env.OpenRun(pub, "run-2"); !errors.As(err, &se) || se.Field != "run" || se.Got != "run-1" || se.Want != "run-2" {
		t.Errorf("another run: %v, want a SubjectError on run", err)
	}
	if _, err := env.OpenRun(otherPub, "run-1"); !errors.Is(err, ErrNoSignature) {
		t.Errorf("another key: %v, want ErrNoSignature", err)
	}
	// A verdict receipt signed by the same key is not a run receipt, even
	// with a run_id in its payload.
	verdict := Sign(priv, PayloadTypeVerdict, payload)
	var te *RunPayloadTypeError
	if _, err := verdict.OpenRun(pub, "run-1"); !errors.As(err, &te) || te.Got != PayloadTypeVerdict {
		t.Errorf("verdict payload type: %v, want RunPayloadTypeError", err)
	}
	// Re-typing a signed run receipt breaks its signature.
	retyped := *env
	retyped.PayloadType = PayloadTypeVerdict
	if _, err := retyped.OpenRun(pub, "run-1"); !errors.Is(err, ErrBadSignature) {
		t.Errorf("retyped: %v, want ErrBadSignature", err)
	}
	noRun := Sign(priv, PayloadTypeRun, []byte(`{"outcome":"VERIFIED"}`))
	if _, err := noRun.OpenRun(pub, ""); err == nil {
		t.Error("a run receipt without run_id was accepted")
	}
}

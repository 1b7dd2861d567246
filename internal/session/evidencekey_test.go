package session

import (
	"bytes"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/judge"
)

// TestEvidenceKeys: a given key is the one every digest is made under; made
// without one, a random key of the right size, stable for the holder's
// life and not shared with another holder.
func TestEvidenceKeys(t *testing.T) {
	key := bytes.Repeat([]byte{9}, EvidenceKeySize)
	k := newEvidenceKeys(key)
	if !bytes.Equal(k.key(), key) {
		t.Fatal("a given key is not the one held")
	}
	mac := judge.NewKeyedHash(key)
	mac.Write([]byte("record"))
	if got, want := k.keyedDigest([]byte("record")), judge.KeyedSum(mac); got != want || !strings.HasPrefix(got, "hmac-sha256:") {
		t.Errorf("keyedDigest %q, want %q", got, want)
	}
	if newEvidenceKeys(bytes.Repeat([]byte{8}, EvidenceKeySize)).keyedDigest([]byte("record")) == k.keyedDigest([]byte("record")) {
		t.Error("two keys digest alike")
	}

	r1, r2 := newEvidenceKeys(nil), newEvidenceKeys(nil)
	if len(r1.key()) != EvidenceKeySize || bytes.Equal(r1.key(), make([]byte, EvidenceKeySize)) {
		t.Fatalf("random key of %d bytes: %x", len(r1.key()), r1.key())
	}
	if bytes.Equal(r1.key(), r2.key()) {
		t.Error("two random keys are equal")
	}
	if d := r1.keyedDigest([]byte("x")); d != newEvidenceKeys(r1.key()).keyedDigest([]byte("x")) {
		t.Errorf("a random key's digest %s is not the key's", d)
	}
}

// TestManagerEvidenceKey: a Manager without EvidenceKey keeps one random
// key for its lifetime; with one, it uses it, also when set after build.
func TestManagerEvidenceKey(t *testing.T) {
	m := &Manager{}
	first := m.KeyedDigest([]byte("x"))
	if m.KeyedDigest([]byte("x")) != first || !bytes.Equal(m.evidence().key(), m.EvidenceDigestKey()) {
		t.Fatal("the Manager's random key changed")
	}
	m.EvidenceKey = bytes.Repeat([]byte{3}, EvidenceKeySize)
	if got := m.KeyedDigest([]byte("x")); got != newEvidenceKeys(m.EvidenceKey).keyedDigest([]byte("x")) || got == first {
		t.Errorf("EvidenceKey set after build is not used: %s", got)
	}
}

package session

import (
	"bytes"
	"strings"
	"testing"
	"time"

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

// TestManagerEvidenceKey: a Manager made without an evidence key keeps one
// random key for its lifetime; with one, it uses it; New refuses a key of
// the wrong length.
func TestManagerEvidenceKey(t *testing.T) {
	m := newManager(t)
	first := m.KeyedDigest([]byte("x"))
	if m.KeyedDigest([]byte("x")) != first || !bytes.Equal(m.evidence().key(), m.EvidenceDigestKey()) {
		t.Fatal("the Manager's random key changed")
	}
	key := bytes.Repeat([]byte{3}, EvidenceKeySize)
	keyed := mustNew(t, Options{Host: m.host, Store: m.store, EvidenceKey: key})
	if got := keyed.KeyedDigest([]byte("x")); got != newEvidenceKeys(key).keyedDigest([]byte("x")) || got == first {
		t.Errorf("Options.EvidenceKey is not used: %s", got)
	}
	if _, err := New(Options{Host: m.host, Store: m.store, EvidenceKey: key[:16]}); err == nil || !strings.Contains(err.Error(), "EvidenceKey holds 16 bytes, not 32") {
		t.Errorf("New with a 16-byte key: %v, want a refusal naming its length", err)
	}
}

// TestNewRefuses: New refuses a Manager without its store or host, naming
// the missing option and what to do.
func TestNewRefuses(t *testing.T) {
	m := newManager(t)
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no store", Options{Host: m.host}, "Options.Store is nil; open the session store"},
		{"no host", Options{Store: m.store}, "Options.Host is nil; start the plugin host"},
		{"negative poll", Options{Host: m.host, Store: m.store, PollInterval: -time.Second}, "Options.PollInterval is -1s"},
	} {
		if got, err := New(tc.o); err == nil || got != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, %v; want a refusal saying %q", tc.name, got, err, tc.want)
		}
	}
}

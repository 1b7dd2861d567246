package store_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// chain builds n chained entries as a store keeps them (canonical bytes).
func chain(n int) [][]byte {
	var out [][]byte
	prev := receipt.Genesis
	for i := 1; i <= n; i++ {
		e := receipt.Entry{Seq: uint64(i), Prev: prev, Type: "verify", Session: "s", Digest: receipt.PayloadDigest([]byte{byte(i)}), At: time.Unix(int64(i), 0)}
		out = append(out, e.Canonical())
		prev = e.Hash()
	}
	return out
}

func checkpoint(t *testing.T, priv ed25519.PrivateKey, entries [][]byte, seq int) []byte {
	t.Helper()
	env, err := receipt.SignCheckpoint(priv, uint64(seq), receipt.PayloadDigest(entries[seq-1]), time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rewrite edits entry seq and, when rechain, re-links the later entries.
func rewrite(entries [][]byte, seq int, rechain bool) [][]byte {
	out := append([][]byte(nil), entries...)
	prev := ""
	for i := seq - 1; i < len(out); i++ {
		var e receipt.Entry
		_ = json.Unmarshal(out[i], &e)
		switch {
		case i == seq-1:
			e.Type = "forged"
		case rechain:
			e.Prev = prev
		default:
			return out
		}
		out[i], prev = e.Canonical(), e.Hash()
	}
	return out
}

func TestLedgerChecker(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	keyID := receipt.KeyID(pub)
	clean := chain(6)
	cases := []struct {
		name    string
		entries [][]byte
		cps     map[int][]byte
		want    string // "" = sound
		signed  uint64
	}{
		{"sound", clean, map[int][]byte{3: checkpoint(t, priv, clean, 3), 6: checkpoint(t, priv, clean, 6)}, "", 6},
		{"sound, tail unvouched", clean, map[int][]byte{4: checkpoint(t, priv, clean, 4)}, "", 4},
		{"edited, chain left", rewrite(clean, 2, false), nil, "entry 2 was changed", 0},
		{"edited, chain re-linked", rewrite(clean, 2, true), map[int][]byte{6: checkpoint(t, priv, clean, 6)}, "the checkpoint signed at seq 6", 6},
		{"an entry removed", append(append([][]byte(nil), clean[:2]...), clean[3:]...), nil, "entries 3 to 3 are missing", 0},
		{"cut at the end", clean[:4], map[int][]byte{6: checkpoint(t, priv, clean, 6)}, "no longer holds", 6},
		{"a checkpoint by another key", clean, map[int][]byte{6: checkpoint(t, other, clean, 6)}, "checkpoint 6", 0},
		{"not canonical", append(append([][]byte(nil), clean[:5]...), []byte(" "+string(clean[5]))), nil, "not stored in its canonical form", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := store.NewLedgerChecker(keyID)
			for seq, cp := range tc.cps {
				c.Checkpoint(uint64(seq), cp)
			}
			for _, raw := range tc.entries {
				var e receipt.Entry
				_ = json.Unmarshal(raw, &e)
				c.Entry(e.Seq, raw)
			}
			rep := c.Report()
			got := strings.Join(rep.Problems, "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("problems %q; want %q", got, tc.want)
			}
			if rep.Signed != tc.signed || rep.Entries != len(tc.entries) {
				t.Errorf("report %+v; want signed %d, %d entries", rep, tc.signed, len(tc.entries))
			}
		})
	}
}

package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/verifierd/verifierd/internal/session"
)

// shownBytes is how much of an offending value a refusal may quote (as
// internal/session quotes it).
const shownBytes = 64

// clip shortens a value for an error message: never echo a huge input
// whole.
func clip(s string) string {
	if len(s) <= shownBytes {
		return s
	}
	cut := shownBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// overLimit is the Invalid refusal of a value over a limit.
func overLimit(path string, got, limit int, unit, fix string) error {
	return &session.Error{Kind: session.Invalid, Path: path, Message: fmt.Sprintf("%d %s is over the limit of %d %s; %s", got, unit, limit, unit, fix)}
}

// sha256Hex is "sha256:" and the hex SHA-256 of b (as the session's
// receipts digest).
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// jsonDigest is sha256Hex of v's JSON.
func jsonDigest(v any) string {
	b, _ := json.Marshal(v)
	return sha256Hex(b)
}

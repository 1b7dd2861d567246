package harness

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/judge"
)

// arenaCase is a case whose after read is large enough (over 65,536
// fields) for the decoder to take its fields from an arena.
func arenaCase() string {
	var sb strings.Builder
	sb.WriteString(`{"effects": [{"kind": "record_written", "match": {"p": "1"}, "expected_count": 1, "count_new_only": true}],`)
	sb.WriteString(`"before": {"reachable": true, "records": [{"id": 0, "p": "0", "n": 1, "t": true}]},`)
	sb.WriteString(`"after": {"reachable": true, "records": [`)
	for i := range 20000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		p := "0"
		if i == 12345 {
			p = "1"
		}
		fmt.Fprintf(&sb, `{"id": %d, "p": "%s", "n": %d.5, "t": false}`, i, p, i)
	}
	sb.WriteString(`]}}`)
	return sb.String()
}

// TestArenaFromOptions: judge.Options.Arena is where a large case's
// fields go; a verdict judged from arena memory, or from the heap when the
// arena declines or hands out memory a field cannot sit in, is the one
// RunString gives.
func TestArenaFromOptions(t *testing.T) {
	t.Parallel()
	input := arenaCase()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want, code := RunString(input, now)
	if code != ExitOK || !bytes.Contains(want, []byte(`"outcome": "VERIFIED"`)) {
		t.Fatalf("RunString = %d %s, want a VERIFIED case", code, want)
	}
	var asked, given int
	arenas := map[string]func(int) []byte{
		"heap memory": func(size int) []byte { asked++; given += size; return make([]byte, size) },
		"declines":    func(int) []byte { asked++; return nil },
		"misaligned":  func(size int) []byte { asked++; return make([]byte, size+1)[1:] },
	}
	for name, arena := range arenas {
		asked, given = 0, 0
		got, code := RunOptions(input, now, judge.Options{Arena: arena})
		if code != ExitOK || !bytes.Equal(got, want) {
			t.Fatalf("%s: RunOptions = %d %s, want %s", name, code, got, want)
		}
		if asked == 0 {
			t.Fatalf("%s: the arena was never asked for a large read's fields", name)
		}
		if name == "heap memory" && given < 80000*16 {
			t.Fatalf("%s: the arena gave %d bytes, want room for the read's 80,000 fields", name, given)
		}
	}
}

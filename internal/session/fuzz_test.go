package session

import (
	"errors"
	"strings"
	"testing"
)

// FuzzBeginRequest drives a Begin request's validation (limits, parsing,
// binding, the document cache) with arbitrary bytes: it must never panic,
// must refuse only with an Invalid refusal whose message stays short, and
// must answer the same way twice (a cache hit never changes the answer).
func FuzzBeginRequest(f *testing.F) {
	f.Add([]byte("effects: {kind: sql, sqlite_database: /tmp/x.db, sql_query: SELECT 1}\n"),
		[]byte(`[{"kind": "record_written", "match": {"p": {"param": "p"}}}]`), "p", "1", "ses_0123")
	f.Add([]byte("effects:\n  candidates:\n  - {kind: a}\n  - {kind: b}\n"), []byte("- kind: record_deleted\n  match: {id: \"1\"}\n"), "", "", "")
	f.Add([]byte("effects: {kind: &a x}\n"), []byte("- &a {kind: record_written}\n- *a\n"), "p\xff", "\xfe", strings.Repeat("s", 200))
	f.Add([]byte(strings.Repeat("[", 100)), []byte(strings.Repeat("{a: ", 50)), "k", strings.Repeat("v", 70000), "ses_")
	f.Fuzz(func(t *testing.T, deployment, effects []byte, name, value, id string) {
		params := map[string]string{name: value}
		_, contracts, err := parse(deployment, effects, params)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Kind != Invalid {
				t.Fatalf("refusal %T %v, want an Invalid session refusal", err, err)
			}
			if n := len(se.Error()); n > 3*messageBytes {
				t.Fatalf("refusal is %d bytes", n)
			}
		} else if len(contracts) == 0 || len(contracts) > MaxEffects {
			t.Fatalf("accepted %d contracts", len(contracts))
		}
		_, _, again := parse(deployment, effects, params)
		if (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("answers differ: %v, then %v", err, again)
		}
		if err := CheckSessionID(id); err != nil {
			if len(err.Error()) > 3*messageBytes {
				t.Fatalf("session id refusal is %d bytes", len(err.Error()))
			}
		} else if len(id) == 0 || len(id) > MaxIDBytes {
			t.Fatalf("accepted a %d-byte session id", len(id))
		}
	})
}

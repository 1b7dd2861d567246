package sql

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestTranslatePlaceholders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		query     string
		d         dialect
		numbered  bool
		want      string
		wantNames []string
	}{
		{"numbered, a name reused", "SELECT a FROM t WHERE x = :a AND y = %(b)s OR z = :a", postgresDialect, true,
			"SELECT a FROM t WHERE x = $1 AND y = $2 OR z = $1", []string{"a", "b"}},
		{"question marks, a name bound twice", "SELECT a FROM t WHERE x = :a AND y = %(b)s OR z = :a", mysqlDialect, false,
			"SELECT a FROM t WHERE x = ? AND y = ? OR z = ?", []string{"a", "b", "a"}},
		{"casts are not placeholders", "SELECT x::text FROM t WHERE y = :a::int", postgresDialect, true,
			"SELECT x::text FROM t WHERE y = $1::int", []string{"a"}},
		{"literals are text", "SELECT ':a', $$ :b $$, \":c\" FROM t WHERE y = :d", postgresDialect, true,
			"SELECT ':a', $$ :b $$, \":c\" FROM t WHERE y = $1", []string{"d"}},
		{"mysql strings with backslashes", `SELECT 'it\'s :a' FROM t WHERE y = :b`, mysqlDialect, false,
			`SELECT 'it\'s :a' FROM t WHERE y = ?`, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, names, err := translatePlaceholders(tt.query, tt.d, tt.numbered)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !cmp.Equal(names, tt.wantNames) {
				t.Errorf("got %q %v\nwant %q %v", got, names, tt.want, tt.wantNames)
			}
		})
	}
}

// TestTranslationCannotChangeTheReading: a placeholder glued to what comes
// before it could become part of a dollar quote or an identifier once
// numbered; such queries are refused, not run with a new meaning.
func TestTranslationCannotChangeTheReading(t *testing.T) {
	t.Parallel()
	tried := 0
	for _, q := range []string{
		"SELECT $:x, $$ ; DELETE FROM t; $$",
		"SELECT a:x FROM t",
		"SELECT 1 FROM t WHERE a = $:x",
	} {
		if CheckReadOnly(q) != nil {
			continue // the filter already refuses it
		}
		tried++
		_, _, err := translatePlaceholders(q, postgresDialect, true)
		var ce *refusal.Error
		if !errors.As(err, &ce) || !strings.Contains(ce.Message, "runs into the text") {
			t.Errorf("translating %q = %v; want a refusal", q, err)
		}
	}
	if tried < 2 {
		t.Errorf("only %d of the queries passed the filter; the test proves little", tried)
	}
}

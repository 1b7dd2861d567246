package sql

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
)

// corpus reads a testdata file of one statement per line. Blank lines and
// lines starting with "# " are skipped; a literal \n stands for a newline.
func corpus(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		out = append(out, strings.ReplaceAll(line, `\n`, "\n"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckReadOnlyRefusesCorpus(t *testing.T) {
	t.Parallel()
	statements := corpus(t, "refuse.txt")
	if len(statements) < 60 {
		t.Fatalf("refuse.txt has %d statements, want at least 60", len(statements))
	}
	for _, q := range statements {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			for name, check := range map[string]func(string) error{
				"CheckReadOnly": CheckReadOnly,
				"sqlite":        func(q string) error { return checkForDriver(q, driverSQLite) },
				"mysql":         func(q string) error { return checkForDriver(q, driverMySQL) },
				"postgres":      func(q string) error { return checkForDriver(q, driverPostgres) },
			} {
				err := check(q)
				if _, ok := errors.AsType[*RefusalError](err); !ok {
					t.Fatalf("%s(%q) = %v, want a *RefusalError", name, q, err)
				}
				if !strings.HasPrefix(err.Error(), "sql_query: refused: ") {
					t.Errorf("%s: message %q does not start with %q", name, err, "sql_query: refused: ")
				}
			}
		})
	}
}

func TestCheckReadOnlyAcceptsCorpus(t *testing.T) {
	t.Parallel()
	statements := corpus(t, "accept.txt")
	if len(statements) < 20 {
		t.Fatalf("accept.txt has %d statements, want at least 20", len(statements))
	}
	for _, q := range statements {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			if err := CheckReadOnly(q); err != nil {
				t.Fatalf("CheckReadOnly(%q) = %v, want nil", q, err)
			}
		})
	}
}

func TestRefusalNamesTheToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  string
	}{
		{"DELETE FROM t", "sql_query: refused: contains DELETE (a read-only SELECT or WITH is required)"},
		{"SELECT 1; delete from t", "sql_query: refused: contains DELETE (a read-only SELECT or WITH is required)"},
		{"WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", "sql_query: refused: contains DELETE (a read-only SELECT or WITH is required)"},
		{"SELECT * FROM t FOR UPDATE", "sql_query: refused: contains FOR UPDATE (row locking is not reading; a read-only SELECT or WITH is required)"},
		{"SELECT * FROM t FOR KEY SHARE", "sql_query: refused: contains FOR KEY SHARE (row locking is not reading; a read-only SELECT or WITH is required)"},
		{"SELECT * FROM t LOCK IN SHARE MODE", "sql_query: refused: contains LOCK IN SHARE MODE (row locking is not reading; a read-only SELECT or WITH is required)"},
		{"SELECT pg_catalog.PG_SLEEP(1)", "sql_query: refused: contains pg_sleep (a function with side effects; a read-only SELECT or WITH is required)"},
		{"SELECT dblink_connect('x')", "sql_query: refused: contains dblink_connect (a function with side effects; a read-only SELECT or WITH is required)"},
		{"SELECT 1 -- hi", "sql_query: refused: contains -- (comments are not allowed: they can hide text from the filter)"},
		{"SELECT 1 /* hi */", "sql_query: refused: contains /* (comments are not allowed: they can hide text from the filter)"},
		{"SELECT 1; SELECT 2", "sql_query: refused: contains a second statement after ; (one statement only; a single trailing ; is allowed)"},
		{"VALUES (1)", "sql_query: refused: starts with VALUES (a read-only SELECT or WITH is required)"},
		{"(SELECT 1)", `sql_query: refused: starts with "(" (a read-only SELECT or WITH is required)`},
		{"  ", "sql_query: refused: contains nothing (write one SELECT or WITH statement)"},
		{"SELECT 'open", "sql_query: refused: contains an unterminated string literal at byte 7 (close it)"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			err := CheckReadOnly(tt.query)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("CheckReadOnly(%q)\n got %v\nwant %s", tt.query, err, tt.want)
			}
		})
	}
}

// TestMySQLReading covers queries that only MySQL reads as code: '$' is an
// identifier character there, not a dollar quote.
func TestMySQLReading(t *testing.T) {
	t.Parallel()
	for _, q := range []string{
		"SELECT $$; DELETE FROM t; $$",
		"SELECT $tag$ x; DROP TABLE t; $tag$",
	} {
		if err := CheckReadOnly(q); err != nil {
			t.Fatalf("CheckReadOnly(%q) = %v; the case needs a query PostgreSQL reads as one literal", q, err)
		}
		var r *RefusalError
		if err := checkForDriver(q, driverMySQL); !errors.As(err, &r) {
			t.Errorf("the mysql reading accepted %q", q)
		}
	}
}

// TestSQLiteReading covers queries whose meaning depends on the engine's
// quoting rules: the sqlite driver checks them both ways.
func TestSQLiteReading(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query       string
		genericOK   bool
		sqliteOK    bool
		sqliteToken string
	}{
		// To SQLite [a'] is an identifier, so what follows is code.
		{"SELECT [a'], 1; DELETE FROM t; SELECT [']", true, false, "DELETE"},
		// SQLite has no dollar quotes: the keywords are code there.
		{"SELECT $$delete from t$$ AS s", true, false, "DELETE"},
		{"SELECT [delete] FROM t", false, true, ""},
		{"SELECT [order id] FROM t WHERE x = :x", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			if err := CheckReadOnly(tt.query); (err == nil) != tt.genericOK {
				t.Errorf("CheckReadOnly = %v, want ok=%v", err, tt.genericOK)
			}
			err := checkReadOnly(tt.query, sqliteDialect)
			if (err == nil) != tt.sqliteOK {
				t.Fatalf("sqlite reading = %v, want ok=%v", err, tt.sqliteOK)
			}
			var r *RefusalError
			if err != nil && errors.As(err, &r) && r.Token != tt.sqliteToken {
				t.Errorf("sqlite reading refused %q, want %q", r.Token, tt.sqliteToken)
			}
		})
	}
}

func FuzzCheckReadOnly(f *testing.F) {
	for _, name := range []string{"refuse.txt", "accept.txt"} {
		for _, q := range corpus(f, name) {
			f.Add(q)
		}
	}
	f.Fuzz(func(t *testing.T, q string) {
		err := CheckReadOnly(q)
		for _, driver := range []string{driverSQLite, driverMySQL, driverPostgres} {
			if err != nil && checkForDriver(q, driver) == nil {
				t.Fatalf("the %s check accepted %q, which CheckReadOnly refused: %v", driver, q, err)
			}
		}
		if err != nil {
			var r *RefusalError
			if !errors.As(err, &r) || r.Token == "" {
				t.Fatalf("CheckReadOnly(%q) = %#v, want a *RefusalError naming a token", q, err)
			}
			return
		}
		// Accepted: it starts with SELECT or WITH as a whole word ...
		trimmed := strings.TrimLeft(q, " \t\n\r\f\v")
		word := trimmed
		for i := 0; i < len(trimmed); i++ {
			if !isIdentByte(trimmed[i]) {
				word = trimmed[:i]
				break
			}
		}
		if !strings.EqualFold(word, "select") && !strings.EqualFold(word, "with") {
			t.Fatalf("accepted %q, which does not start with SELECT or WITH", q)
		}
		// ... and in every reading it has no ';' outside literals except a
		// trailing one, and no comment opener.
		for _, d := range genericDialects {
			toks, lerr := lex(q, d)
			if lerr != nil {
				t.Fatalf("accepted %q, which the %s reading cannot lex: %v", q, d.name, lerr.token)
			}
			for i, tok := range toks {
				if tok.kind == tokPunct && tok.text == ";" && i != len(toks)-1 {
					t.Fatalf("accepted %q with a ';' before its end (%s reading)", q, d.name)
				}
			}
		}
		// Whatever is accepted stops being accepted with a statement stacked
		// after it.
		if CheckReadOnly(strings.TrimRight(q, "; \t\n\r\f\v")+"; DELETE FROM t") == nil {
			t.Fatalf("accepted %q with a DELETE stacked after it", q)
		}
	})
}

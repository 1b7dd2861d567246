package config

import (
	"strings"
	"testing"
)

// TestSQLWholeRead is the whole-read recogniser's allowlist: only one
// SELECT of columns from one table, optionally ordered, is whole; every
// other shape, adversarial ones included, is narrowed and says why.
func TestSQLWholeRead(t *testing.T) {
	t.Parallel()
	whole := []string{
		"SELECT id FROM encounters",
		"select id, patient_id from encounters",
		"SELECT * FROM encounters",
		"SELECT e.* FROM public.encounters e",
		"SELECT e.id AS ident, e.note n FROM clinic.public.encounters AS e ORDER BY e.id DESC NULLS LAST, note",
		`SELECT "where", "select" FROM "my table" ORDER BY "where"`,
		"SELECT `id` FROM `db`.`t`",
		"SELECT [id] FROM [dbo].[t]",
		"SELECT id, 'where' AS w, 1 AS one FROM e",
		"SELECT id, 'it''s' FROM e;",
		"SELECT id -- WHERE id = 1\nFROM e",
		"SELECT id /* WHERE x = 1 JOIN y */ FROM e",
		"SELECT id FROM e -- LIMIT 5",
		"SELECT id, *\n\tFROM e\n",
		`SELECT "a""b" FROM e`,
	}
	for _, q := range whole {
		if ok, why := sqlWholeRead(q); !ok {
			t.Errorf("%q narrowed (%s), want whole", q, why)
		}
	}
	narrowed := []struct{ q, why string }{
		{"SELECT id FROM e WHERE status = 1", "filters with WHERE"},
		{"SELECT id FROM e where status = 1", "filters with WHERE"},
		{"SELECT a.id FROM a JOIN b ON a.b_id = b.id", "JOIN"},
		{"SELECT a.id FROM a INNER JOIN b ON a.b_id = b.id", "INNER JOIN"},
		{"SELECT a.id FROM a LEFT OUTER JOIN b USING (id)", "LEFT JOIN"},
		{"SELECT a.id FROM a CROSS JOIN b", "CROSS JOIN"},
		{"SELECT id FROM a NATURAL JOIN b", "NATURAL JOIN"},
		{"SELECT id FROM a, b", "comma join"},
		{"SELECT id FROM a x, b y", "comma join"},
		{"SELECT id FROM (SELECT id FROM e) t", "subquery"},
		{"SELECT id FROM e UNION SELECT id FROM f", "UNION"},
		{"SELECT id FROM e INTERSECT SELECT id FROM f", "INTERSECT"},
		{"SELECT id FROM e EXCEPT SELECT id FROM f", "EXCEPT"},
		{"WITH x AS (SELECT id FROM e) SELECT id FROM x", "WITH clause"},
		{"SELECT id FROM e GROUP BY id", "GROUP BY"},
		{"SELECT id FROM e HAVING count(*) > 1", "HAVING"},
		{"SELECT DISTINCT id FROM e", "DISTINCT"},
		{"SELECT id FROM e LIMIT 10", "LIMIT"},
		{"SELECT id FROM e ORDER BY id LIMIT 10 OFFSET 5", "LIMIT"},
		{"SELECT id FROM e OFFSET 5", "OFFSET"},
		{"SELECT id FROM e FETCH FIRST 5 ROWS ONLY", "FETCH"},
		{"SELECT id FROM e ORDER BY id FETCH FIRST 5 ROWS ONLY", "FETCH"},
		{"SELECT TOP 5 id FROM e", "TOP"},
		{"SELECT id FROM e; SELECT id FROM f", "more than one statement"},
		{"SELECT id FROM e;;", "more than one statement"},
		{"SELECT id FROM e WHERE p = $1", "WHERE"},
		{"SELECT id FROM e ORDER BY $1", "$n"},
		{"SELECT id FROM e ORDER BY ?", "(?)"},
		{"SELECT :name FROM e", ":name"},
		{"SELECT %(x)s FROM e", "%(name)s"},
		{"SELECT count(*) FROM e", "function"},
		{"SELECT id FROM ONLY e", "ONLY"},
		{"SELECT id FROM e TABLESAMPLE SYSTEM (10)", "TABLESAMPLE"},
		{"SELECT id FROM e FOR UPDATE", `"FOR"`},
		{"SELECT id FROM e /*! WHERE id = 1 */", "executable"},
		{"SELECT id FROM e /* a /* nested */ WHERE id = 1 */", "nested"},
		{"SELECT id FROM e /* unterminated", "unterminated"},
		{"SELECT 'unterminated FROM e", "unterminated"},
		// MySQL reads "\"" as a string with an escaped quote: the two
		// servers would see different queries.
		{`SELECT "\", " FROM t WHERE k = 1 -- " FROM t`, "backslash"},
		{`SELECT id FROM e --x WHERE 1`, `"-"`},
		{"SELECT id FROM e # WHERE x", `"#"`},
		{"SELECT id FROM e AS", "not a complete SELECT"},
		{"SELECT FROM e", `"FROM"`},
		{"", "not a complete SELECT"},
		{"UPDATE e SET x = 1", `"UPDATE"`},
		{"SELECT id INTO t2 FROM e", `"INTO"`},
		{"SELECT id FROM e ORDER BY lower(id)", "function"},
		{"SELECT $$a$$ FROM e", "$n"},
	}
	for _, tt := range narrowed {
		ok, why := sqlWholeRead(tt.q)
		if ok || !strings.Contains(why, tt.why) {
			t.Errorf("%q: whole %v (%q), want narrowed saying %q", tt.q, ok, why, tt.why)
		}
	}
}

// FuzzSQLWholeRead: whatever the query, the recogniser answers without
// panicking, and a query it calls whole holds, outside its comments and
// quoted text, exactly one SELECT and one FROM and none of the words or
// characters that narrow a read.
func FuzzSQLWholeRead(f *testing.F) {
	for _, q := range []string{
		"SELECT id FROM e", "SELECT id FROM e WHERE x = 1", "SELECT a.id FROM a JOIN b ON a.id = b.id",
		"SELECT id -- WHERE\nFROM e", `SELECT "where" FROM e`, "SELECT id FROM e; DROP TABLE e",
		`SELECT "\", " FROM t WHERE k = 1 -- " FROM t`, "SELECT id FROM e /* x */ ORDER BY id",
	} {
		f.Add(q)
	}
	narrowing := []string{"WHERE", "JOIN", "UNION", "INTERSECT", "EXCEPT", "WITH", "GROUP", "HAVING", "DISTINCT", "LIMIT", "OFFSET", "FETCH", "TOP"}
	f.Fuzz(func(t *testing.T, q string) {
		whole, why := sqlWholeRead(q)
		if !whole {
			if why == "" {
				t.Errorf("%q narrowed without a reason", q)
			}
			return
		}
		toks, err := sqlTokens(q)
		if err != nil {
			t.Fatalf("%q whole but does not tokenise: %v", q, err)
		}
		counts := map[string]int{}
		for _, tk := range toks {
			switch tk.kind {
			case tokWord:
				counts[tk.upper()]++
			case tokOther:
				t.Errorf("%q whole but holds %q", q, tk.text)
			case tokPunct:
				if tk.text == "(" || tk.text == ")" {
					t.Errorf("%q whole but holds a parenthesis", q)
				}
			}
		}
		if counts["SELECT"] != 1 || counts["FROM"] != 1 {
			t.Errorf("%q whole with %d SELECT and %d FROM", q, counts["SELECT"], counts["FROM"])
		}
		for _, w := range narrowing {
			if counts[w] > 0 {
				t.Errorf("%q whole but holds %s", q, w)
			}
		}
	})
}

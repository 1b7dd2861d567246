package sql

import "testing"

func TestCappedRead(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"SELECT id FROM encounters WHERE patient_id = :p":                                  "",
		"SELECT id FROM encounters LIMIT 100":                                              "LIMIT",
		"select id from encounters order by id limit 100 offset 5":                         "LIMIT",
		"SELECT id FROM encounters ORDER BY id FETCH FIRST 50 ROWS ONLY":                   "FETCH FIRST",
		"SELECT id FROM encounters OFFSET 0 ROWS FETCH NEXT 50 ROWS ONLY":                  "FETCH NEXT",
		"SELECT TOP 10 id FROM encounters":                                                 "TOP",
		"SELECT DISTINCT TOP 10 id FROM encounters":                                        "TOP",
		"SELECT id FROM encounters WHERE id IN (SELECT id FROM latest LIMIT 5)":            "",
		"WITH recent AS (SELECT id FROM encounters LIMIT 5) SELECT id FROM recent":         "",
		"WITH recent AS (SELECT id FROM encounters) SELECT id FROM recent LIMIT 5":         "LIMIT",
		"SELECT id, 'LIMIT 5' AS note FROM encounters":                                     "",
		`SELECT "limit", top FROM encounters`:                                              "",
		"SELECT id FROM encounters UNION SELECT id FROM archive LIMIT 10":                  "LIMIT",
		"SELECT id FROM (SELECT id FROM encounters FETCH FIRST 3 ROWS ONLY) AS t":          "",
		"SELECT id FROM encounters WHERE note = 'x' AND id > (SELECT TOP 1 id FROM other)": "",
	} {
		if got := CappedRead(q); got != want {
			t.Errorf("CappedRead(%q) = %q, want %q", q, got, want)
		}
	}
}

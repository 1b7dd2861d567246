package config

import (
	"fmt"
	"slices"
	"strings"
)

// The whole-read recogniser: an allowlist of the one SQL shape whose read
// the daemon can prove returns the whole table,
//
//	SELECT <columns or *> FROM [schema.]table [[AS] alias] [ORDER BY <columns>] [;]
//
// A column is a (qualified, possibly quoted) name, t.* or a literal, with an
// optional alias. Anything the recogniser does not positively recognise
// (a WHERE, a JOIN of any kind, a comma join, a subquery, a set operation,
// WITH, GROUP BY, HAVING, DISTINCT, LIMIT, OFFSET, FETCH, TOP, a bound
// parameter, a second statement, a function call, a character it does not
// know) makes the read narrowed. Keywords are case-insensitive; comments,
// quoted identifiers and string literals are skipped as such, so a WHERE in
// a comment or a column called "where" does not narrow the read.

// sqlTokKind is the kind of one token of a query.
type sqlTokKind int

const (
	tokWord   sqlTokKind = iota // a bare identifier or keyword
	tokQuoted                   // a quoted identifier: "x", `x` or [x]
	tokString                   // a string literal: 'x'
	tokNumber                   // a numeric literal
	tokPunct                    // one of , . * ( ) ;
	tokOther                    // anything else: an operator, a parameter
)

// sqlTok is one token: its kind and its text as written.
type sqlTok struct {
	kind sqlTokKind
	text string
}

// upper is the token's text in upper case (a keyword's spelling).
func (t sqlTok) upper() string { return strings.ToUpper(t.text) }

// sqlTokens splits q into tokens, dropping whitespace and comments. An
// unterminated literal, quoted identifier or comment, a nested block
// comment and a string literal holding a backslash (whose meaning depends
// on the server) are errors: the read is then not recognised.
func sqlTokens(q string) ([]sqlTok, error) {
	var out []sqlTok
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || strings.IndexByte(" \t\r\n", q[i+2]) >= 0):
			// MySQL reads -- as a comment only before white space.
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				return out, nil
			}
			i += j + 1
		case strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			if j < 0 || strings.Contains(q[i+2:i+2+j], "/*") || strings.HasPrefix(q[i:], "/*!") {
				return nil, fmt.Errorf("an unterminated, nested or executable (/*!) comment")
			}
			i += j + 4
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end, err := quotedEnd(q, i)
			if err != nil {
				return nil, err
			}
			kind := tokQuoted
			if c == '\'' {
				kind = tokString
			}
			out = append(out, sqlTok{kind, q[i:end]})
			i = end
		case isWordByte(c) && c != '$' && (c < '0' || c > '9'):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			out = append(out, sqlTok{tokWord, q[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(q) && (q[j] >= '0' && q[j] <= '9' || q[j] == '.') {
				j++
			}
			out = append(out, sqlTok{tokNumber, q[i:j]})
			i = j
		case strings.IndexByte(",.*();", c) >= 0:
			out = append(out, sqlTok{tokPunct, q[i : i+1]})
			i++
		default:
			out = append(out, sqlTok{tokOther, q[i : i+1]})
			i++
		}
	}
	return out, nil
}

// quotedEnd is the offset just past the quoted text opening at q[i]: a
// doubled closing quote stands for itself. Quoted text holding a backslash
// is refused: MySQL reads it as an escape (and "x" as a string), PostgreSQL
// does not, so the two would see different queries.
func quotedEnd(q string, i int) (int, error) {
	closer := q[i]
	if closer == '[' {
		closer = ']'
	}
	for j := i + 1; j < len(q); j++ {
		switch {
		case q[j] == '\\':
			return 0, fmt.Errorf("quoted text holding a backslash, whose meaning differs between servers")
		case q[j] == closer && j+1 < len(q) && q[j+1] == closer && closer != ']':
			j++
		case q[j] == closer:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("an unterminated quote")
}

// sqlReserved are the words that are never a bare column, table or alias
// name in a whole read: every clause keyword the recogniser refuses, so
// that SELECT DISTINCT id or FROM t LIMIT is not read as a name and its
// alias.
var sqlReserved = []string{
	"ALL", "AND", "ANY", "AS", "ASC", "BETWEEN", "BY", "CASE", "CROSS", "CUBE", "CURRENT", "DESC", "DISTINCT",
	"EXCEPT", "EXISTS", "FETCH", "FIRST", "FOR", "FROM", "FULL", "GROUP", "HAVING", "IN", "INNER",
	"INTERSECT", "INTO", "IS", "JOIN", "LAST", "LATERAL", "LEFT", "LIKE", "LIMIT", "MINUS", "NATURAL", "NEXT", "NOT",
	"NULL", "NULLS", "OFFSET", "ON", "ONLY", "OR", "ORDER", "OUTER", "PARTITION", "QUALIFY", "RETURNING",
	"RIGHT", "ROLLUP", "ROWS", "SAMPLE", "SELECT", "SETS", "STRAIGHT_JOIN", "TABLE", "TABLESAMPLE", "TOP",
	"UNION", "UNIQUE", "USING", "VALUES", "WHERE", "WINDOW", "WITH",
}

// sqlWhy says, for the token at which the recogniser stopped, what it
// does to the read.
var sqlWhy = map[string]string{
	"WHERE": "filters with WHERE", "HAVING": "filters with HAVING", "QUALIFY": "filters with QUALIFY",
	"JOIN": "joins another table (JOIN)", "INNER": "joins another table (INNER JOIN)", "LEFT": "joins another table (LEFT JOIN)",
	"RIGHT": "joins another table (RIGHT JOIN)", "FULL": "joins another table (FULL JOIN)", "CROSS": "joins another table (CROSS JOIN)",
	"NATURAL": "joins another table (NATURAL JOIN)", "STRAIGHT_JOIN": "joins another table (STRAIGHT_JOIN)", "LATERAL": "joins another table (LATERAL)",
	",": "joins another table (a comma join)", "(": "reads a subquery, a function or an expression",
	"UNION": "combines queries (UNION)", "INTERSECT": "combines queries (INTERSECT)", "EXCEPT": "combines queries (EXCEPT)", "MINUS": "combines queries (MINUS)",
	"WITH": "has a WITH clause", "GROUP": "groups rows (GROUP BY)", "DISTINCT": "drops rows (DISTINCT)",
	"LIMIT": "limits rows (LIMIT)", "OFFSET": "skips rows (OFFSET)", "FETCH": "limits rows (FETCH)", "TOP": "limits rows (TOP)",
	"TABLESAMPLE": "samples rows (TABLESAMPLE)", "ONLY": "reads only part of an inherited table (ONLY)",
	"?": "binds a parameter (?)", "$": "binds a parameter ($n)", ":": "binds a parameter (:name)", "%": "binds a parameter (%(name)s)",
	";": "holds more than one statement",
}

// sqlWholeRead reports whether q is a read the recogniser proves whole;
// when it is not, why says what narrows it (or what it did not recognise).
func sqlWholeRead(q string) (whole bool, why string) {
	toks, err := sqlTokens(q)
	if err != nil {
		return false, "holds " + err.Error()
	}
	p := &sqlParser{toks: toks}
	if p.whole() {
		return true, ""
	}
	if p.pos >= len(toks) {
		return false, "is not a complete SELECT of columns from one table"
	}
	if p.pos > 0 && toks[p.pos-1].text == ";" {
		return false, sqlWhy[";"]
	}
	t := toks[p.pos]
	if w, ok := sqlWhy[t.upper()]; ok && (t.kind == tokWord || t.kind == tokPunct || t.kind == tokOther) {
		return false, w
	}
	return false, fmt.Sprintf("holds %q where the whole-read shape (SELECT columns FROM one table, optionally ORDER BY) has none", t.text)
}

// sqlParser walks the tokens of one query; pos is where it stopped.
type sqlParser struct {
	toks []sqlTok
	pos  int
}

func (p *sqlParser) peek() (sqlTok, bool) {
	if p.pos >= len(p.toks) {
		return sqlTok{}, false
	}
	return p.toks[p.pos], true
}

// keyword consumes the bare word kw (case-insensitive).
func (p *sqlParser) keyword(kw string) bool {
	t, ok := p.peek()
	if ok && t.kind == tokWord && t.upper() == kw {
		p.pos++
		return true
	}
	return false
}

// punct consumes the punctuation s.
func (p *sqlParser) punct(s string) bool {
	t, ok := p.peek()
	if ok && t.kind == tokPunct && t.text == s {
		p.pos++
		return true
	}
	return false
}

// name consumes one identifier: a quoted one, or a bare word that is not
// reserved.
func (p *sqlParser) name() bool {
	t, ok := p.peek()
	if ok && (t.kind == tokQuoted || (t.kind == tokWord && !slices.Contains(sqlReserved, t.upper()))) {
		p.pos++
		return true
	}
	return false
}

// whole parses the whole-read shape to the end of the tokens.
func (p *sqlParser) whole() bool {
	if !p.keyword("SELECT") || !p.columns() || !p.keyword("FROM") || !p.table() {
		return false
	}
	if p.keyword("ORDER") && (!p.keyword("BY") || !p.orderList()) {
		return false
	}
	p.punct(";")
	return p.pos == len(p.toks)
}

// columns parses a list of columns (or *).
func (p *sqlParser) columns() bool {
	for {
		if !p.column() {
			return false
		}
		if !p.punct(",") {
			return true
		}
	}
}

// column parses *, or a literal, a (qualified) name or t.* and then an
// optional alias.
func (p *sqlParser) column() bool {
	if p.punct("*") {
		return true
	}
	if t, ok := p.peek(); ok && (t.kind == tokString || t.kind == tokNumber) {
		p.pos++
	} else if !p.qualified(true) {
		return false
	}
	return p.alias()
}

// qualified parses name(.name)*, ending in .* when star is allowed.
func (p *sqlParser) qualified(star bool) bool {
	if !p.name() {
		return false
	}
	for p.punct(".") {
		if star && p.punct("*") {
			return true
		}
		if !p.name() {
			return false
		}
	}
	return true
}

// alias parses an optional [AS] name.
func (p *sqlParser) alias() bool {
	if p.keyword("AS") {
		return p.name()
	}
	p.name()
	return true
}

// table parses one [schema.]table and its optional alias.
func (p *sqlParser) table() bool {
	return p.qualified(false) && p.alias()
}

// orderList parses column [ASC|DESC] [NULLS FIRST|LAST], ...
func (p *sqlParser) orderList() bool {
	for {
		if !p.qualified(false) {
			return false
		}
		_ = p.keyword("ASC") || p.keyword("DESC")
		if p.keyword("NULLS") && !p.keyword("FIRST") && !p.keyword("LAST") {
			return false
		}
		if !p.punct(",") {
			return true
		}
	}
}

package sql

import "strings"

// CappedRead names the row cap on a query's outermost statement: "LIMIT",
// "FETCH FIRST" (or "FETCH NEXT") or "TOP", standing outside every
// parenthesis, or "" when there is none. A cap inside a subquery or a WITH
// clause's body narrows that part only; a cap on the outermost statement
// cuts the read itself, so a record past it is never seen (a duplicate
// goes uncounted, an old record reads as lost). Every dialect the filter
// knows is tried; a query none of them can read has no cap to report (the
// filter refuses it anyway).
func CappedRead(query string) string {
	for _, d := range []dialect{postgresDialect, backslashDialect, sqliteDialect, mysqlDialect} {
		toks, lerr := lex(query, d)
		if lerr != nil {
			continue
		}
		if c := outerCap(toks); c != "" {
			return c
		}
	}
	return ""
}

func outerCap(toks []token) string {
	depth := 0
	for i, t := range toks {
		switch {
		case t.kind == tokPunct && t.text == "(":
			depth++
		case t.kind == tokPunct && t.text == ")":
			depth--
		case depth != 0 || t.kind != tokWord:
		case strings.EqualFold(t.text, "LIMIT"):
			return "LIMIT"
		case strings.EqualFold(t.text, "FETCH") && i+1 < len(toks) &&
			(strings.EqualFold(toks[i+1].text, "FIRST") || strings.EqualFold(toks[i+1].text, "NEXT")):
			return "FETCH " + strings.ToUpper(toks[i+1].text)
		case strings.EqualFold(t.text, "TOP") && i > 0 && toks[i-1].kind == tokWord &&
			(strings.EqualFold(toks[i-1].text, "SELECT") || strings.EqualFold(toks[i-1].text, "DISTINCT") || strings.EqualFold(toks[i-1].text, "ALL")):
			return "TOP"
		}
	}
	return ""
}

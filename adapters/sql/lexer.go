package sql

import (
	"fmt"
	"strings"
)

// tokenKind classifies what the lexer found.
type tokenKind int

const (
	tokWord        tokenKind = iota // a bare identifier or keyword
	tokQuotedIdent                  // "name", `name` or [name]
	tokString                       // 'text', E'text', $$text$$, $tag$text$tag$
	tokNumber                       // digits, with an optional fraction
	tokPunct                        // one byte of anything else: ( ) , ; . % : ? ...
)

// token is one lexeme of a query: its kind, its text as written, and its byte
// span in the query.
type token struct {
	kind       tokenKind
	text       string
	start, end int
}

// dialect says how an engine reads the parts of a query that hide text from
// the parser: string literals and quoted identifiers. The filter reads a
// query once per dialect the query may meet, so that text one engine treats
// as a literal is still checked when another engine would run it as code.
type dialect struct {
	name string
	// dollarQuotes: $$text$$ and $tag$text$tag$ are string literals
	// (PostgreSQL); elsewhere '$' is an ordinary character.
	dollarQuotes bool
	// backslashEscapes: a backslash escapes the next character inside '...'
	// and "..." (MySQL), and "..." is a string, not an identifier.
	backslashEscapes bool
	// eStrings: E'text' uses backslash escapes (PostgreSQL).
	eStrings bool
	// bracketIdents: [name] is a quoted identifier (SQLite, SQL Server);
	// elsewhere '[' is a subscript and what it holds is code.
	bracketIdents bool
}

var (
	postgresDialect  = dialect{name: "postgres", dollarQuotes: true, eStrings: true}
	backslashDialect = dialect{name: "backslash-escaped", dollarQuotes: true, backslashEscapes: true}
	sqliteDialect    = dialect{name: "sqlite", bracketIdents: true}
	// mysqlDialect is MySQL and MariaDB: backslash escapes, "..." strings,
	// and no dollar quotes ($ is an identifier character there, so $$ is
	// a name and what follows it is code).
	mysqlDialect = dialect{name: "mysql", backslashEscapes: true}
)

// lexError is a query the lexer cannot read safely; token names what it
// stopped at.
type lexError struct {
	token  string
	reason string
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// isIdentByte reports the bytes that continue a bare identifier. '$' does in
// PostgreSQL, MySQL and SQLite alike (foo$bar). Non-ASCII bytes do not: they
// split words, so a keyword glued to a character some engine might read as
// a separator is still seen as a keyword.
func isIdentByte(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// lex splits q into tokens as d reads it. Whitespace is dropped. A comment, a
// NUL byte or an unterminated literal is an error: the filter refuses what it
// cannot read exactly as the engine would.
func lex(q string, d dialect) ([]token, *lexError) {
	var toks []token
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case isSpace(c):
			i++
		case c == 0:
			return nil, &lexError{token: "a NUL byte", reason: "a query is text; remove it"}
		case c == '-' && i+1 < len(q) && q[i+1] == '-',
			c == '/' && i+1 < len(q) && q[i+1] == '*',
			c == '#':
			return nil, &lexError{token: q[i : i+commentLen(c)], reason: "comments are not allowed: they can hide text from the filter"}
		case c == '\'':
			end, ok := scanQuoted(q, i, '\'', d.backslashEscapes)
			if !ok {
				return nil, unterminated(q, i)
			}
			toks = append(toks, token{kind: tokString, text: q[i:end], start: i, end: end})
			i = end
		case c == '"':
			end, ok := scanQuoted(q, i, '"', d.backslashEscapes)
			if !ok {
				return nil, unterminated(q, i)
			}
			kind := tokQuotedIdent
			if d.backslashEscapes {
				kind = tokString
			}
			toks = append(toks, token{kind: kind, text: q[i:end], start: i, end: end})
			i = end
		case c == '`':
			end, ok := scanQuoted(q, i, '`', false)
			if !ok {
				return nil, unterminated(q, i)
			}
			toks = append(toks, token{kind: tokQuotedIdent, text: q[i:end], start: i, end: end})
			i = end
		case c == '[' && d.bracketIdents:
			j := strings.IndexByte(q[i+1:], ']')
			if j < 0 {
				return nil, unterminated(q, i)
			}
			end := i + 1 + j + 1
			toks = append(toks, token{kind: tokQuotedIdent, text: q[i:end], start: i, end: end})
			i = end
		case c == '$' && d.dollarQuotes:
			if tag, ok := dollarTag(q, i); ok {
				j := strings.Index(q[i+len(tag):], tag)
				if j < 0 {
					return nil, unterminated(q, i)
				}
				end := i + len(tag) + j + len(tag)
				toks = append(toks, token{kind: tokString, text: q[i:end], start: i, end: end})
				i = end
				continue
			}
			toks = append(toks, token{kind: tokPunct, text: "$", start: i, end: i + 1})
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			word := q[i:j]
			if d.eStrings && (word == "E" || word == "e") && j < len(q) && q[j] == '\'' {
				end, ok := scanQuoted(q, j, '\'', true)
				if !ok {
					return nil, unterminated(q, i)
				}
				toks = append(toks, token{kind: tokString, text: q[i:end], start: i, end: end})
				i = end
				continue
			}
			toks = append(toks, token{kind: tokWord, text: word, start: i, end: j})
			i = j
		case c >= '0' && c <= '9':
			// Only digits and dots: what follows a number (1e5, 1delete)
			// is read as a separate word, as PostgreSQL reads it, so a
			// keyword cannot hide behind a digit.
			j := i + 1
			for j < len(q) && (q[j] >= '0' && q[j] <= '9' || q[j] == '.') {
				j++
			}
			toks = append(toks, token{kind: tokNumber, text: q[i:j], start: i, end: j})
			i = j
		default:
			toks = append(toks, token{kind: tokPunct, text: q[i : i+1], start: i, end: i + 1})
			i++
		}
	}
	return toks, nil
}

func commentLen(c byte) int {
	if c == '#' {
		return 1
	}
	return 2
}

func unterminated(q string, at int) *lexError {
	return &lexError{token: fmt.Sprintf("an unterminated %s at byte %d", quoteName(q[at]), at), reason: "close it"}
}

func quoteName(c byte) string {
	switch c {
	case '"', '`', '[':
		return "quoted identifier"
	default:
		return "string literal"
	}
}

// scanQuoted returns the end (exclusive) of the literal opened by quote at
// q[start]. A doubled quote is an escaped quote; with backslash, a backslash
// escapes the next byte too.
func scanQuoted(q string, start int, quote byte, backslash bool) (int, bool) {
	for i := start + 1; i < len(q); i++ {
		switch q[i] {
		case '\\':
			if backslash {
				i++
			}
		case quote:
			if i+1 < len(q) && q[i+1] == quote {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return 0, false
}

// dollarTag reads a PostgreSQL dollar-quote opener at q[i]: "$$" or "$tag$"
// where tag is an identifier. "$1" (a positional parameter) is not one.
func dollarTag(q string, i int) (string, bool) {
	j := i + 1
	if j < len(q) && q[j] == '$' {
		return "$$", true
	}
	if j >= len(q) || !isIdentStart(q[j]) {
		return "", false
	}
	for j < len(q) && (isIdentStart(q[j]) || q[j] >= '0' && q[j] <= '9') {
		j++
	}
	if j < len(q) && q[j] == '$' {
		return q[i : j+1], true
	}
	return "", false
}

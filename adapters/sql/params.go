package sql

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// parseParams reads every sql_query_params entry (a string,
// {literal: "text"} or {param: name}; the grammar of sdk/param) once, at
// Configure; each call binds them to its run parameters. A {param: name}
// the run does not supply refuses the call: a query must never run with a
// hole where its subject goes. Values are only ever bound as driver
// arguments, so they need no escaping.
func parseParams(raw map[string]json.RawMessage) (param.Values, error) {
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !validPlaceholderName(name) {
			return param.Values{}, &refusal.Error{Path: "sql_query_params." + name, Message: "a placeholder name is letters, digits and _, starting with a letter or _"}
		}
	}
	return param.ParseMap(raw, "sql_query_params")
}

// bindParams binds the parsed sql_query_params to one call's run
// parameters, as driver arguments in the order names gives.
func bindParams(vs param.Values, names []string, params map[string]string) ([]any, error) {
	bound, err := vs.Bind(params)
	if err != nil {
		return nil, err
	}
	return bindArgs(names, bound)
}

func validPlaceholderName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentStart(s[i]) && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// translatePlaceholders rewrites the named placeholders of q, %(name)s (as
// in the Python kit) and :name, into the driver's positional form, '?' or
// (numbered, for PostgreSQL) $1, $2 ..., and returns the names in the order
// the driver binds them. A name used twice is bound twice with '?' and
// reuses its number with $n. Literals and quoted identifiers are left
// alone, so ':x' inside a string stays text. Values are only ever bound as
// driver parameters; nothing is spliced into SQL.
func translatePlaceholders(q string, d dialect, numbered bool) (string, []string, error) {
	toks, lerr := lex(q, d)
	if lerr != nil {
		// The filter has already accepted q; this is only reachable if
		// they disagree, which is refused rather than guessed at.
		return "", nil, &refusal.Error{Path: "sql_query", Message: "cannot read " + lerr.token}
	}
	var out strings.Builder
	var names []string
	number := map[string]int{}
	uses := 0
	placeholder := func(name string) string {
		uses++
		if !numbered {
			names = append(names, name)
			return "?"
		}
		n, ok := number[name]
		if !ok {
			names = append(names, name)
			n = len(names)
			number[name] = n
		}
		return "$" + strconv.Itoa(n)
	}
	last := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tokPunct {
			continue
		}
		switch t.text {
		case "%":
			if n := pyformatAt(toks, i); n > 0 {
				out.WriteString(q[last:t.start])
				out.WriteString(placeholder(toks[i+2].text))
				last = toks[i+n-1].end
				i += n - 1
				continue
			}
			if adjacent(toks, i, "(") {
				return "", nil, &refusal.Error{Path: "sql_query", Message: fmt.Sprintf("malformed placeholder at byte %d; write %%(name)s", t.start)}
			}
		case ":":
			prevColon := i > 0 && toks[i-1].kind == tokPunct && toks[i-1].text == ":" && toks[i-1].end == t.start
			if !prevColon && i+1 < len(toks) && toks[i+1].kind == tokWord && toks[i+1].start == t.end {
				out.WriteString(q[last:t.start])
				out.WriteString(placeholder(toks[i+1].text))
				last = toks[i+1].end
				i++
				continue
			}
		case "?":
			return "", nil, &refusal.Error{Path: "sql_query", Message: fmt.Sprintf("positional placeholder ? at byte %d; name it %%(name)s or :name and bind it under sql_query_params", t.start)}
		case "@", "$":
			if i+1 < len(toks) && toks[i+1].start == t.end && (toks[i+1].kind == tokWord || toks[i+1].kind == tokNumber) {
				return "", nil, &refusal.Error{Path: "sql_query", Message: fmt.Sprintf("placeholder %s%s is not supported; write %%(%s)s or :%s and bind it under sql_query_params", t.text, toks[i+1].text, toks[i+1].text, toks[i+1].text)}
			}
		}
	}
	out.WriteString(q[last:])
	translated := out.String()
	if err := checkTranslation(translated, d, numbered, uses); err != nil {
		return "", nil, err
	}
	return translated, names, nil
}

// checkTranslation reads the translated query again: it must pass the
// filter in the same reading and hold exactly the placeholders written into
// it. A placeholder glued to the text before it could otherwise change how
// the engine reads it ("$" + "$1" opens a dollar quote, "a" + "$1" is an
// identifier).
func checkTranslation(q string, d dialect, numbered bool, want int) error {
	glued := &refusal.Error{Path: "sql_query", Message: "a placeholder runs into the text just before it; put a space before each %(name)s or :name"}
	if err := checkReadOnly(q, d); err != nil {
		return glued
	}
	toks, lerr := lex(q, d)
	if lerr != nil {
		return glued
	}
	got := 0
	for i, t := range toks {
		if t.kind != tokPunct {
			continue
		}
		if !numbered && t.text == "?" {
			got++
		}
		if numbered && t.text == "$" && i+1 < len(toks) && toks[i+1].kind == tokNumber && toks[i+1].start == t.end {
			got++
		}
	}
	if got != want {
		return glued
	}
	return nil
}

// pyformatAt matches "%(name)s" starting at toks[i], with nothing between the
// pieces, and returns how many tokens it spans (0 if it does not match).
func pyformatAt(toks []token, i int) int {
	if i+4 >= len(toks) {
		return 0
	}
	open, name, closing, s := toks[i+1], toks[i+2], toks[i+3], toks[i+4]
	if open.text != "(" || name.kind != tokWord || closing.text != ")" || s.kind != tokWord || s.text != "s" {
		return 0
	}
	for k := i; k < i+4; k++ {
		if toks[k].end != toks[k+1].start {
			return 0
		}
	}
	return 5
}

func adjacent(toks []token, i int, text string) bool {
	return i+1 < len(toks) && toks[i+1].text == text && toks[i+1].start == toks[i].end
}

// bindArgs lines up the bound values with the query's placeholders. Every
// placeholder needs an entry and every entry a placeholder, so that a typo
// on either side is refused instead of reading with a missing value.
func bindArgs(names []string, bound map[string]string) ([]any, error) {
	used := make(map[string]bool, len(names))
	args := make([]any, len(names))
	for i, n := range names {
		v, ok := bound[n]
		if !ok {
			return nil, &refusal.Error{Path: "sql_query", Message: fmt.Sprintf("placeholder %q has no entry in sql_query_params; add %s: {param: NAME} or a literal", n, n)}
		}
		args[i] = v
		used[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(bound)) {
		if !used[n] {
			return nil, &refusal.Error{Path: "sql_query_params." + n, Message: fmt.Sprintf("the query never uses it; write %%(%s)s or :%s in sql_query, or remove the entry", n, n)}
		}
	}
	return args, nil
}

package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/sdk/strict"
)

// A census is a second read of a candidate's collection, bound to no run
// parameter, whose records give the identities of the whole collection
// (judge.Census). It lets the judge tell a record created by the step from
// one that already existed and now matches, and see a loss outside the
// subject's read. A candidate declares one under census:, written with the
// read keys of the candidate's own kind; it inherits the candidate's
// connection and credentials, nothing of its read.

// Newness values: how a candidate proves that a record is new.
const (
	// NewnessWholeRead: the operator asserts the read returns the whole
	// collection, or filters only on fields no step can change.
	NewnessWholeRead = "whole_read"
	// NewnessNewlyMatching: the operator accepts (reviewed, documented)
	// that "new" means "newly matching the read".
	NewnessNewlyMatching = "newly_matching"
	// NewnessCensus is what results record for a candidate with a census.
	NewnessCensus = "census"
)

// Collateral scopes results record: what a loss check could see.
const (
	ScopeCollection = "collection"
	ScopeSubject    = "subject"
)

// censusReadKeys are, per built-in kind that reads a collection, the keys
// that say what a read returns: the only keys a census may write. Every
// other key of the candidate (connection, TLS, credentials, timeouts) is
// inherited. The first key is required.
var censusReadKeys = map[string][]string{
	"sql":     {"sql_query"},
	"rest":    {"records_path", "records_key", "pagination", "single_response", "max_records", "total_path", "total_header", "field_paths"},
	"graphql": {"graphql_query", "graphql_records_path", "graphql_variables", "pagination", "single_response", "max_records", "total_path", "total_header", "field_paths"},
	"fhir":    {"resource_type", "search_params", "max_pages", "field_paths"},
}

// pluginReadKeys are the read keys of a plugin kind's census.
var pluginReadKeys = []string{"options"}

// bindingKeys bind a run parameter into a read. A census refuses them, and
// never inherits them from its candidate.
var bindingKeys = []string{"sql_query_params", "path_params", "search_param_exprs", "option_params"}

// readsCollection reports whether kind reads a collection of records and so
// may declare a census: sql, rest, graphql, fhir and every plugin kind.
func readsCollection(kind string) bool {
	if _, ok := censusReadKeys[kind]; ok {
		return true
	}
	return !BuiltinKinds[kind]
}

func readKeysOf(kind string) []string {
	if keys, ok := censusReadKeys[kind]; ok {
		return keys
	}
	return pluginReadKeys
}

// placeholderRE finds a {name} placeholder of a URL template.
var placeholderRE = regexp.MustCompile(`\{[A-Za-z_][A-Za-z0-9_.\-]*\}`)

// parseNewness reads a candidate's newness: and census: keys.
func parseNewness(c *Candidate, sec map[string]any, path string) error {
	if v, ok := sec["newness"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr || (s != NewnessWholeRead && s != NewnessNewlyMatching) {
			return errorf(path+".newness", "must be %s (the read returns the whole collection, or filters only on fields no step can change) or %s (new means newly matching the read: a reviewed, documented risk); to prove newness declare census: instead", NewnessWholeRead, NewnessNewlyMatching)
		}
		c.Newness = s
	}
	raw, ok := sec["census"]
	if !ok || raw == nil {
		return nil
	}
	cpath := path + ".census"
	if c.Newness != "" {
		return errorf(path+".newness", "a candidate with census: proves newness by its census; remove newness: or census:")
	}
	if !readsCollection(c.Kind) {
		return errorf(cpath, "the kind %q does not read a collection of records, so it can have no census; remove census: (a census is for sql, rest, graphql, fhir and plugin kinds)", c.Kind)
	}
	cm, isMap := raw.(map[string]any)
	if !isMap {
		return errorf(cpath, "must be a map of %s read keys (e.g. sql_query: SELECT id FROM encounters)", c.Kind)
	}
	allowed := readKeysOf(c.Kind)
	for _, k := range slices.Sorted(maps.Keys(cm)) {
		switch {
		case slices.Contains(bindingKeys, k) || strings.HasSuffix(k, "_params"):
			return errorf(cpath+"."+k, "a census binds no run parameter: it reads the whole collection for every run; remove %s and write the read without parameters", k)
		case !slices.Contains(allowed, k):
			hint := ""
			if near := strict.Closest(k, allowed); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return errorf(cpath+"."+k, "not a read key of %s; a census writes only %s and inherits the candidate's connection and credentials%s", c.Kind, strings.Join(allowed, ", "), hint)
		}
		if err := refuseParams(cm[k], cpath+"."+k); err != nil {
			return err
		}
	}
	if first := allowed[0]; BuiltinKinds[c.Kind] {
		if _, ok := cm[first]; !ok {
			return errorf(cpath+"."+first, "missing: a census writes its own read (%s); it inherits only the candidate's connection and credentials", first)
		}
	}
	switch c.Kind {
	case "rest":
		if s, _ := cm["records_path"].(string); placeholderRE.MatchString(s) {
			return errorf(cpath+".records_path", "has the placeholder %s: a census binds no run parameter; write the path of the whole collection", placeholderRE.FindString(s))
		}
	case "sql":
		q, isStr := cm["sql_query"].(string)
		if !isStr || strings.TrimSpace(q) == "" {
			return errorf(cpath+".sql_query", "must be a read-only SELECT of the whole collection's identities, e.g. SELECT id FROM encounters")
		}
		if name := sqlPlaceholder(q); name != "" {
			return errorf(cpath+".sql_query", "has the placeholder %s: a census binds no run parameter; read the whole collection", name)
		}
	}
	section := map[string]any{}
	for k, v := range c.Section {
		if slices.Contains(allowed, k) || slices.Contains(bindingKeys, k) || k == "graphql_variables" {
			continue
		}
		section[k] = v
	}
	maps.Copy(section, cm)
	c.Census = &Candidate{
		Index: c.Index, Kind: c.Kind, Section: section, Secrets: maps.Clone(c.Secrets),
		Redaction: c.Redaction,
	}
	return nil
}

// refuseParams refuses a {param: name} (or {template: ...}) anywhere in a
// census value.
func refuseParams(v any, path string) error {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["param"]; ok && len(x) == 1 {
			return errorf(path, "binds the run parameter %v: a census reads the whole collection for every run; write a literal or remove it", x["param"])
		}
		if _, ok := x["template"]; ok && len(x) == 1 {
			return errorf(path, "a template binds run parameters: a census reads the whole collection for every run; write a literal or remove it")
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := refuseParams(x[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range x {
			if err := refuseParams(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// sqlScan walks q outside its string literals, quoted identifiers and
// comments, calling fn with each byte offset of code and the parenthesis
// depth there.
func sqlScan(q string, fn func(i, depth int)) {
	depth := 0
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '\'' || c == '"' || c == '`':
			for i++; i < len(q) && q[i] != c; i++ {
				if q[i] == '\\' && c != '"' {
					i++
				}
			}
		case c == '[':
			for i++; i < len(q) && q[i] != ']'; i++ {
			}
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for ; i < len(q) && q[i] != '\n'; i++ {
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if j := strings.Index(q[i+2:], "*/"); j >= 0 {
				i += j + 3
			} else {
				i = len(q)
			}
		case c == '(':
			depth++
			fn(i, depth)
		case c == ')':
			fn(i, depth)
			depth--
		default:
			fn(i, depth)
		}
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// sqlPlaceholder returns the first named placeholder (:name or %(name)s)
// of q outside its literals, or "".
func sqlPlaceholder(q string) string {
	found := ""
	sqlScan(q, func(i, _ int) {
		if found != "" {
			return
		}
		switch {
		case q[i] == ':' && i+1 < len(q) && isWordByte(q[i+1]) && (q[i+1] < '0' || q[i+1] > '9') && (i == 0 || q[i-1] != ':'):
			j := i + 1
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			found = q[i:j]
		case q[i] == '%' && i+1 < len(q) && q[i+1] == '(':
			if j := strings.IndexByte(q[i:], ')'); j > 0 {
				found = q[i:min(len(q), i+j+2)]
			}
		}
	})
	return found
}

// sqlFilters returns the filtering clauses (WHERE, HAVING) of q outside its
// literals, at any depth: a filter in a subquery or a WITH narrows the read
// as one at the top does.
func sqlFilters(q string) []string {
	var out []string
	sqlScan(q, func(i, _ int) {
		if !isWordByte(q[i]) || (i > 0 && isWordByte(q[i-1])) {
			return
		}
		j := i
		for j < len(q) && isWordByte(q[j]) {
			j++
		}
		switch w := strings.ToUpper(q[i:j]); w {
		case "WHERE", "HAVING":
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	})
	return out
}

// unnarrowingSearchParams are fhir search parameters that shape a read
// without filtering it.
var unnarrowingSearchParams = []string{"_count", "_sort", "_elements"}

// Narrowing says what narrows this candidate's read below its whole
// collection: a run parameter bound into it, a filter the daemon can see (a
// WHERE or HAVING in sql_query, a fhir search_params entry other than
// _count, _sort, _elements), or an HTTP kind (rest, graphql), whose filters
// the daemon cannot see. Empty means the read is unnarrowed.
func (c *Candidate) Narrowing() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c.Section)) {
		if names := paramNames(c.Section[k]); len(names) > 0 {
			out = append(out, fmt.Sprintf("%s binds the run parameter(s) %s", k, strings.Join(names, ", ")))
		}
	}
	var bound []string
	for _, k := range slices.Sorted(maps.Keys(c.OptionParams)) {
		if v := c.OptionParams[k]; v.IsParam() {
			bound = append(bound, v.Param)
		}
	}
	if len(bound) > 0 {
		out = append(out, fmt.Sprintf("option_params binds the run parameter(s) %s", strings.Join(bound, ", ")))
	}
	if _, ok := censusReadKeys[c.Kind]; !ok && BuiltinKinds[c.Kind] {
		// The other built-in kinds expand {name} placeholders of their
		// URLs and patterns from the run's parameters.
		for _, k := range slices.Sorted(maps.Keys(c.Section)) {
			if names := placeholders(c.Section[k]); len(names) > 0 {
				out = append(out, fmt.Sprintf("%s holds the placeholder(s) %s", k, strings.Join(names, ", ")))
			}
		}
	}
	switch c.Kind {
	case "sql":
		if q, ok := c.Section["sql_query"].(string); ok {
			if fs := sqlFilters(q); len(fs) > 0 {
				out = append(out, fmt.Sprintf("sql_query filters with %s", strings.Join(fs, " and ")))
			}
		}
	case "fhir":
		if sp, ok := c.Section["search_params"].(map[string]any); ok {
			var names []string
			for _, k := range slices.Sorted(maps.Keys(sp)) {
				if !slices.Contains(unnarrowingSearchParams, k) {
					names = append(names, k)
				}
			}
			if len(names) > 0 {
				out = append(out, fmt.Sprintf("search_params filters on %s", strings.Join(names, ", ")))
			}
		}
	case "rest", "graphql":
		out = append(out, fmt.Sprintf("%s reads over HTTP, whose filters the daemon cannot see", c.Kind))
	}
	return out
}

// paramNames lists the run parameters a section value binds: {param: name}
// anywhere in it, and the {name} placeholders a template writes.
func paramNames(v any) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["param"].(string); ok && len(x) == 1 {
				seen[p] = true
				return
			}
			if t, ok := x["template"].(string); ok && len(x) == 1 {
				for _, m := range placeholderRE.FindAllString(t, -1) {
					seen[strings.Trim(m, "{}")] = true
				}
				return
			}
			for _, item := range x {
				walk(item)
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		}
	}
	walk(v)
	return slices.Sorted(maps.Keys(seen))
}

// NewnessOf is how this candidate's change claims prove that a record is
// new, as results record it: write_set, census, whole_read (declared, or a read that
// nothing narrows), newly_matching (declared, or a narrowed read without
// either).
func (c *Candidate) NewnessOf() string {
	switch {
	case c.Changes != nil:
		return NewnessWriteSet
	case c.Census != nil:
		return NewnessCensus
	case c.Newness != "":
		return c.Newness
	case len(c.Narrowing()) == 0:
		return NewnessWholeRead
	default:
		return NewnessNewlyMatching
	}
}

// CollateralScope is what a loss check through this candidate can see:
// the whole collection (a census, or a read that is whole), or only the
// subject's read.
func (c *Candidate) CollateralScope() string {
	if n := c.NewnessOf(); n == NewnessWriteSet || n == NewnessCensus || n == NewnessWholeRead {
		return ScopeCollection
	}
	return ScopeSubject
}

// placeholders lists the {name} placeholders in the strings of a section
// value.
func placeholders(v any) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			for _, m := range placeholderRE.FindAllString(x, -1) {
				seen[m] = true
			}
		case map[string]any:
			for _, item := range x {
				walk(item)
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		}
	}
	walk(v)
	return slices.Sorted(maps.Keys(seen))
}

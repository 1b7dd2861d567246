package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// A census is a second read of a candidate's collection, bound to no run
// parameter, whose records give the identities of the whole collection
// (judge.Census). It lets the judge tell a record created by the step from
// one that already existed and now matches, and see a loss outside the
// subject's read. A candidate declares one under census:, written with the
// read keys of the candidate's own kind; it inherits the candidate's
// connection and credentials, nothing of its read (a plugin census inherits
// the candidate's options, its own merged over them). A census must be
// whole: proven so by the same rule as any read (Narrowing), or declared
// so by the operator (census_scope: declared).

// Newness values: how a candidate proves that a record is new. The
// operator declares newness: whole_read or newly_matching; results and
// receipts record one of census, whole_read (the daemon proved the read
// whole), whole_read_declared (the operator declared it) or newly_matching.
const (
	// NewnessWholeRead: as a declaration, the operator asserts the read
	// returns the whole collection, or filters only on fields no step can
	// change; as a result, the daemon proved the read whole (WholeRead).
	NewnessWholeRead = "whole_read"
	// NewnessWholeReadDeclared is what results record for a candidate
	// whose operator declared newness: whole_read.
	NewnessWholeReadDeclared = "whole_read_declared"
	// NewnessNewlyMatching: the operator accepts (reviewed, documented)
	// that "new" means "newly matching the read".
	NewnessNewlyMatching = "newly_matching"
	// NewnessCensus is what results record for a candidate with a census.
	NewnessCensus = "census"
)

// Census scopes: how a census is known to cover the whole collection.
const (
	// CensusScopeProven: the daemon proved the census's read whole.
	CensusScopeProven = "proven"
	// CensusScopeDeclared: the operator declared census_scope: declared.
	CensusScopeDeclared = "declared"
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
			return errorf(path+".newness", "must be %s (you assert the read returns the whole collection, or filters only on fields no step can change) or %s (new means newly matching the read: a reviewed, documented risk); to prove newness declare census: instead", NewnessWholeRead, NewnessNewlyMatching)
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
	cm, scope, err := censusScope(maps.Clone(cm), cpath)
	if err != nil {
		return err
	}
	if err := checkCensusKeys(c.Kind, cm, cpath); err != nil {
		return err
	}
	census, err := c.deriveCensus(cm, cpath)
	if err != nil {
		return err
	}
	if scope == CensusScopeProven {
		if why := census.Narrowing(); len(why) > 0 {
			return unprovenCensus(c.Kind, cpath, why)
		}
	}
	c.Census, c.CensusScope = census, scope
	return nil
}

// censusScope takes the census_scope: key out of a census: census_scope:
// declared is the operator's assertion that the census covers the whole
// collection; without it the daemon must prove the census whole.
func censusScope(cm map[string]any, cpath string) (map[string]any, string, error) {
	v, ok := cm["census_scope"]
	if !ok || v == nil {
		delete(cm, "census_scope")
		return cm, CensusScopeProven, nil
	}
	if v != CensusScopeDeclared {
		return nil, "", errorf(cpath+".census_scope", "must be %s (you assert the census covers the whole collection); remove it to have the daemon prove the census whole", CensusScopeDeclared)
	}
	delete(cm, "census_scope")
	return cm, CensusScopeDeclared, nil
}

// unprovenCensus refuses a census the daemon cannot prove whole and the
// operator did not declare, naming both fixes.
func unprovenCensus(kind, cpath string, why []string) error {
	prove := "write it as one SELECT of the collection's table with no WHERE, JOIN, subquery, GROUP BY, DISTINCT, LIMIT or parameter (e.g. SELECT id FROM encounters)"
	if kind != "sql" {
		prove = fmt.Sprintf("a census of kind %s is never proven whole (the daemon cannot see what its read filters), so declare it", kind)
	}
	return errorf(cpath, "cannot be proven to cover the whole collection (%s): %s; or, if it does cover it, write census_scope: declared under census: (your assertion, recorded in every receipt)", strings.Join(why, "; "), prove)
}

// checkCensusKeys refuses a census key that is not a read key of kind, and
// one that binds a run parameter. A literal filter of the kind
// (search_params: {_count: '100'}) is the census's own and is allowed.
func checkCensusKeys(kind string, cm map[string]any, cpath string) error {
	allowed := readKeysOf(kind)
	for _, k := range slices.Sorted(maps.Keys(cm)) {
		switch {
		case slices.Contains(bindingKeys, k):
			return errorf(cpath+"."+k, "a census binds no run parameter: it reads the whole collection for every run; remove %s and write the read without parameters", k)
		case !slices.Contains(allowed, k):
			hint := ""
			if near := strict.Closest(k, append(slices.Clone(allowed), "census_scope")); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return errorf(cpath+"."+k, "not a read key of %s; a census writes only %s (and census_scope) and inherits the candidate's connection and credentials%s", kind, strings.Join(allowed, ", "), hint)
		}
		if err := refuseParams(cm[k], cpath+"."+k); err != nil {
			return err
		}
	}
	if first := allowed[0]; BuiltinKinds[kind] {
		if _, ok := cm[first]; !ok {
			return errorf(cpath+"."+first, "missing: a census writes its own read (%s); it inherits only the candidate's connection and credentials", first)
		}
	}
	switch kind {
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
	return nil
}

// deriveCensus is the census candidate: the candidate's section without its
// read and its parameter bindings, with the census's read keys over it. A
// plugin census inherits the candidate's options, the census's own merged
// over them (null drops an inherited option); an option that would then
// bind a run parameter is refused.
func (c *Candidate) deriveCensus(cm map[string]any, cpath string) (*Candidate, error) {
	allowed := readKeysOf(c.Kind)
	section := map[string]any{}
	for k, v := range c.Section {
		if slices.Contains(allowed, k) || slices.Contains(bindingKeys, k) || k == "graphql_variables" {
			continue
		}
		section[k] = v
	}
	maps.Copy(section, cm)
	if !BuiltinKinds[c.Kind] {
		opts, err := censusOptions(c.Section["options"], cm["options"], cpath)
		if err != nil {
			return nil, err
		}
		delete(section, "options")
		if len(opts) > 0 {
			section["options"] = opts
		}
	}
	return &Candidate{
		Index: c.Index, Kind: c.Kind, Section: section, Secrets: maps.Clone(c.Secrets),
		Redaction: c.Redaction,
	}, nil
}

// censusOptions merges a plugin census's options over its candidate's and
// refuses one that holds a {name} placeholder, which the plugin would fill
// from the run's parameters.
func censusOptions(inherited, own any, cpath string) (map[string]any, error) {
	out := map[string]any{}
	if m, ok := inherited.(map[string]any); ok {
		maps.Copy(out, m)
	}
	if own != nil {
		m, ok := own.(map[string]any)
		if !ok {
			return nil, errorf(cpath+".options", "must be a map of the plugin's options; the census's are merged over the candidate's (null drops one)")
		}
		for k, v := range m {
			if v == nil {
				delete(out, k)
				continue
			}
			out[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(out)) {
		names := placeholders(out[k])
		if len(names) == 0 {
			continue
		}
		from := "has"
		if m, _ := own.(map[string]any); m[k] == nil {
			from = "inherits from the candidate's options." + k
		}
		return nil, errorf(cpath+".options."+k, "%s the placeholder(s) %s, which bind a run parameter: a census reads the whole collection for every run; set census.options.%s to a literal, or to null to drop it", from, strings.Join(names, ", "), k)
	}
	return out, nil
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

// sqlPlaceholder returns the first placeholder (:name, %(name)s, $1 or ?)
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
		case q[i] == '?':
			found = "?"
		case q[i] == '$' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' && (i == 0 || !isWordByte(q[i-1])):
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
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

// httpKinds read over HTTP: the daemon cannot see what their server
// filters, so their reads are never proven whole.
var httpKinds = []string{"rest", "graphql", "fhir"}

// Narrowing says why this candidate's read is not proven to return its
// whole collection; empty means the daemon proved it whole. Only a
// sql_query the whole-read recogniser accepts (sqlwhole.go), with no
// parameter bound into it, is proven whole. A read over HTTP (rest,
// graphql, fhir) and every plugin kind's read are narrowed whatever they
// are written as; a run parameter bound into a read ({param: name}, a
// template, a plugin option holding a {name} placeholder) narrows it. The
// other built-in kinds (document, file, email, ui_readback, onscreen)
// read no collection with a filter and are narrowed only by a {name}
// placeholder.
func (c *Candidate) Narrowing() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c.Section)) {
		if names := paramNames(c.Section[k]); len(names) > 0 {
			out = append(out, fmt.Sprintf("%s binds the run parameter(s) %s", k, strings.Join(names, ", ")))
		}
	}
	if bound := c.optionParamNames(); len(bound) > 0 {
		out = append(out, fmt.Sprintf("option_params binds the run parameter(s) %s", strings.Join(bound, ", ")))
	}
	switch {
	case c.Kind == "sql":
		out = append(out, c.sqlNarrowing()...)
	case slices.Contains(httpKinds, c.Kind):
		out = append(out, fmt.Sprintf("%s reads over HTTP, whose filters the daemon cannot see", c.Kind))
	case !BuiltinKinds[c.Kind]:
		if names := placeholders(c.Section["options"]); len(names) > 0 {
			out = append(out, fmt.Sprintf("options holds the placeholder(s) %s, which bind run parameters", strings.Join(names, ", ")))
		}
		out = append(out, fmt.Sprintf("the plugin kind %s reads through its own adapter, whose filters the daemon cannot see", c.Kind))
	default:
		// The other built-in kinds expand {name} placeholders of their
		// URLs and patterns from the run's parameters.
		for _, k := range slices.Sorted(maps.Keys(c.Section)) {
			if names := placeholders(c.Section[k]); len(names) > 0 {
				out = append(out, fmt.Sprintf("%s holds the placeholder(s) %s", k, strings.Join(names, ", ")))
			}
		}
	}
	return out
}

// optionParamNames lists the run parameters a plugin's option_params
// bind: a {param: name}, a template's placeholders, and the {name}
// placeholders of a literal entry, which the plugin fills itself.
func (c *Candidate) optionParamNames() []string {
	seen := map[string]bool{}
	for _, v := range c.OptionParams {
		for _, name := range v.Params() {
			seen[name] = true
		}
		for _, name := range param.Names(v.Literal) {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// sqlNarrowing is what narrows a sql read: values bound into it, or a
// query the whole-read recogniser does not accept.
func (c *Candidate) sqlNarrowing() []string {
	var out []string
	if qp, ok := c.Section["sql_query_params"].(map[string]any); ok && len(qp) > 0 && len(paramNames(qp)) == 0 {
		out = append(out, "sql_query_params binds values into sql_query")
	}
	q, _ := c.Section["sql_query"].(string)
	if whole, why := sqlWholeRead(q); !whole {
		out = append(out, "sql_query "+why)
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

// NewnessReader is this candidate as the require_proven_newness guard
// sees it (workflow.CheckNewness), under name in its messages (its path
// and kind, e.g. "effects (sql)").
func (c *Candidate) NewnessReader(name string) workflow.Reader {
	return workflow.Reader{Name: name, Census: c.Census != nil, Newness: c.DeclaredNewness(), Narrowing: c.Narrowing()}
}

// NewnessOf is how this candidate's change claims prove that a record is
// new, as results record it: write_set (the database's change log);
// census; whole_read (the daemon proved the read whole);
// whole_read_declared (the operator declared newness: whole_read);
// newly_matching (declared, or a narrowed read without either).
func (c *Candidate) NewnessOf() string {
	switch {
	case c.Changes != nil:
		return NewnessWriteSet
	case c.Census != nil:
		return NewnessCensus
	case c.Newness == NewnessWholeRead:
		return NewnessWholeReadDeclared
	case c.Newness != "":
		return c.Newness
	case len(c.Narrowing()) == 0:
		return NewnessWholeRead
	default:
		return NewnessNewlyMatching
	}
}

// CollateralScope is what a loss check through this candidate can see:
// the whole collection (a census, or a read proven or declared whole), or
// only the subject's read.
func (c *Candidate) CollateralScope() string {
	switch c.NewnessOf() {
	case NewnessWriteSet, NewnessCensus, NewnessWholeRead, NewnessWholeReadDeclared:
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
			for _, name := range param.Names(x) {
				seen["{"+name+"}"] = true
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

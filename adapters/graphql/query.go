package graphql

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// maxQueryTokens bounds the parser's work on an operator's query.
const maxQueryTokens = 15_000

// readQuery is the one read-only operation of graphql_query.
type readQuery struct {
	name      string               // operationName, "" when anonymous
	variables map[string]*ast.Type // declared variables
	required  []string             // non-null variables without a default
	fields    []string             // top-level response keys, when all selections are fields
	supplied  []string             // variables the adapter sets itself (pagination)
}

// parseReadQuery parses q with a real GraphQL parser and refuses anything
// but exactly one query operation: a mutation or subscription writes or
// holds a stream open, and several operations leave the server to pick.
func parseReadQuery(q string) (*readQuery, error) {
	if strings.TrimSpace(q) == "" {
		return nil, fmt.Errorf("missing: write the one read-only query whose answer holds the records")
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Name: "graphql_query", Input: q}, maxQueryTokens)
	if err != nil {
		return nil, fmt.Errorf("is not a GraphQL document: %v", err)
	}
	for _, op := range doc.Operations {
		switch op.Operation {
		case ast.Mutation:
			return nil, fmt.Errorf("refused: %s is a mutation; verification only reads, so write a query", describe(op))
		case ast.Subscription:
			return nil, fmt.Errorf("refused: %s is a subscription; write a query that answers once", describe(op))
		}
	}
	switch len(doc.Operations) {
	case 0:
		return nil, fmt.Errorf("holds no operation; write one query { ... }")
	case 1:
	default:
		return nil, fmt.Errorf("refused: holds %d operations; write exactly one query", len(doc.Operations))
	}
	op := doc.Operations[0]
	rq := &readQuery{name: op.Name, variables: map[string]*ast.Type{}}
	for _, v := range op.VariableDefinitions {
		rq.variables[v.Variable] = v.Type
		if v.DefaultValue == nil && v.Type.NonNull {
			rq.required = append(rq.required, v.Variable)
		}
	}
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok {
			rq.fields = nil
			break
		}
		rq.fields = append(rq.fields, f.Alias)
	}
	return rq, nil
}

func describe(op *ast.OperationDefinition) string {
	if op.Name == "" {
		return "the anonymous " + string(op.Operation)
	}
	return fmt.Sprintf("operation %q", op.Name)
}

// bindVariables turns the bound graphql_variables into JSON values of the
// types the query declares: Int and Float become numbers (their text must
// be one), Boolean true or false, every other type a string. A variable the
// query does not declare, a list variable, or a required variable left
// unbound is refused.
// checkDeclared checks the names graphql_variables binds, before any value
// is known: each is a declared scalar variable, and every required variable
// is bound. It returns the offending name, if any.
func (rq *readQuery) checkDeclared(names []string) (string, error) {
	for _, name := range names {
		typ, ok := rq.variables[name]
		if !ok {
			return name, fmt.Errorf("the query declares no $%s; declare it (query Q($%s: String!) { ... }) or remove the entry", name, name)
		}
		if typ.NamedType == "" {
			return name, fmt.Errorf("$%s is a list (%s); one run parameter binds one value, so declare a scalar", name, typ.String())
		}
	}
	for _, name := range rq.required {
		if !slices.Contains(names, name) && !slices.Contains(rq.supplied, name) {
			return "", fmt.Errorf("the query requires $%s (%s); bind it under graphql_variables", name, rq.variables[name].String())
		}
	}
	return "", nil
}

func (rq *readQuery) bindVariables(values map[string]string) (map[string]any, string, error) {
	out := make(map[string]any, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		v := values[name]
		typ, ok := rq.variables[name]
		if !ok {
			return nil, name, fmt.Errorf("the query declares no $%s; declare it (query Q($%s: String!) { ... }) or remove the entry", name, name)
		}
		// A variable is a JSON value, so it needs no escaping, but it is
		// still one value a caller supplies: no NUL or control characters.
		if err := param.Check(v); err != nil {
			return nil, name, fmt.Errorf("$%s %v", name, err)
		}
		if typ.NamedType == "" {
			return nil, name, fmt.Errorf("$%s is a list (%s); one run parameter binds one value, so declare a scalar", name, typ.String())
		}
		switch typ.NamedType {
		case "Int":
			if _, err := strconv.ParseInt(v, 10, 32); err != nil {
				return nil, name, fmt.Errorf("$%s is an Int, but the bound value is not a 32-bit integer", name)
			}
			if !jsonnum.Valid(v) {
				return nil, name, fmt.Errorf("$%s is an Int, but the bound value is not written as JSON writes a number (no leading + or 0)", name)
			}
			out[name] = json.Number(v)
		case "Float":
			if _, err := strconv.ParseFloat(v, 64); err != nil || !jsonnum.Valid(v) {
				return nil, name, fmt.Errorf("$%s is a Float, but the bound value is not a decimal number as JSON writes one (digits before any point, no leading + or 0)", name)
			}
			out[name] = json.Number(v)
		case "Boolean":
			if v != "true" && v != "false" {
				return nil, name, fmt.Errorf("$%s is a Boolean; bind \"true\" or \"false\"", name)
			}
			out[name] = v == "true"
		default:
			out[name] = v
		}
	}
	for _, name := range rq.required {
		if _, ok := out[name]; !ok && !slices.Contains(rq.supplied, name) {
			return nil, "", fmt.Errorf("the query requires $%s (%s); bind it under graphql_variables", name, rq.variables[name].String())
		}
	}
	return out, "", nil
}

// pagingVariable checks a variable the adapter sets itself, for pagination
// at path: declared by the query, not bound under graphql_variables, and of
// type Int (numeric) or a nullable scalar (a cursor, absent on the first
// page).
func (rq *readQuery) pagingVariable(path, name string, numeric bool, bound []string) error {
	name = strings.TrimPrefix(name, "$")
	if name == "" {
		return fmt.Errorf("%s is empty; name a variable the query declares", path)
	}
	typ, ok := rq.variables[name]
	if !ok {
		return fmt.Errorf("the query declares no $%s; declare it (query Q($%s: %s) { ... }) and pass it to the list field", name, name, map[bool]string{true: "Int", false: "String"}[numeric])
	}
	if slices.Contains(bound, name) {
		return fmt.Errorf("$%s is also bound under graphql_variables; pagination sets it on every page, so remove that entry", name)
	}
	if slices.Contains(rq.supplied, name) {
		return fmt.Errorf("$%s is named twice in pagination", name)
	}
	switch {
	case typ.NamedType == "":
		return fmt.Errorf("$%s is a list (%s); declare a scalar", name, typ.String())
	case numeric && typ.NamedType != "Int":
		return fmt.Errorf("$%s is a %s; a page size or an offset is an Int", name, typ.String())
	case !numeric && typ.NonNull:
		return fmt.Errorf("$%s is %s; declare it nullable (without !): the first page is read without a cursor", name, typ.String())
	}
	rq.supplied = append(rq.supplied, name)
	return nil
}

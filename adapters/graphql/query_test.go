package graphql

import (
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// FuzzParseReadQuery: whatever an operator writes, the guard never panics,
// and anything it accepts is exactly one query operation.
func FuzzParseReadQuery(f *testing.F) {
	for _, seed := range []string{
		encountersQuery,
		`{ encounters(patientId: "p") { id } }`,
		`query A { a } query B { b }`,
		`mutation { addEncounter(patientId: "p", type: "t") { id } }`,
		`subscription S { s }`,
		`fragment F on Encounter { id } query Q { encounter(id: "1") { ...F } }`,
		`query Q($n: Int = 3, $b: [String!]!) { x(n: $n) }`,
		`{ a } mutation { b }`,
		"",
		"query {",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		rq, err := parseReadQuery(q)
		if err != nil {
			return
		}
		doc, perr := parser.ParseQuery(&ast.Source{Input: q})
		if perr != nil {
			t.Fatalf("accepted %q, which the parser refuses: %v", q, perr)
		}
		if len(doc.Operations) != 1 || doc.Operations[0].Operation != ast.Query {
			t.Fatalf("accepted %q with %d operations", q, len(doc.Operations))
		}
		if rq.name != doc.Operations[0].Name {
			t.Fatalf("operation name %q, want %q", rq.name, doc.Operations[0].Name)
		}
	})
}

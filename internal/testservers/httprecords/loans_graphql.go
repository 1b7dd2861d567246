package httprecords

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
)

// LoansGraphQLSchema is the GraphQL API of the Loans server. A list that
// names no limit (limit, first) answers at most the page cap;
// applicationsCount and totalCount count every match.
const LoansGraphQLSchema = `
schema {
	query: Query
	mutation: Mutation
}

type Query {
	applications(applicant: String, product: String, limit: Int, offset: Int): [Application!]!
	applicationsCount(applicant: String, product: String): Int!
	applicationsPage(applicant: String, product: String, first: Int, after: String): ApplicationPage!
}

type Application {
	id: ID!
	applicant: String!
	product: String!
	amount: Float!
	createdAt: String!
}

type ApplicationPage {
	nodes: [Application!]!
	pageInfo: PageInfo!
	totalCount: Int!
}

type PageInfo {
	hasNextPage: Boolean!
	endCursor: String
}

type Mutation {
	submitApplication(applicant: String!, product: String!, amount: String!): Application!
	updateApplication(id: ID!, applicant: String, product: String, amount: String): Application!
	deleteApplication(id: ID!): Boolean!
}
`

func mustLoansSchema(l *Loans) *graphql.Schema {
	return graphql.MustParseSchema(LoansGraphQLSchema, &loansRoot{l: l})
}

func (l *Loans) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	if l.apply(w, r) || !l.authorized(w, r) {
		return
	}
	if st := l.failure(); st != 0 {
		writeJSON(w, st, map[string]any{"errors": []any{map[string]any{"message": "database is locked"}}})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST a JSON body", http.StatusMethodNotAllowed)
		return
	}
	(&relay.Handler{Schema: l.schema}).ServeHTTP(w, r)
}

type loansRoot struct{ l *Loans }

// loansApp resolves an Application.
type loansApp struct{ a LoanApplication }

func (g loansApp) ID() graphql.ID    { return graphql.ID(strconv.FormatInt(g.a.ID, 10)) }
func (g loansApp) Applicant() string { return g.a.Applicant }
func (g loansApp) Product() string   { return g.a.Product }
func (g loansApp) Amount() float64   { return g.a.Amount }
func (g loansApp) CreatedAt() string { return g.a.CreatedAt }

func wrapLoans(apps []LoanApplication) []loansApp {
	out := make([]loansApp, len(apps))
	for i, a := range apps {
		out[i] = loansApp{a}
	}
	return out
}

func loansLimit(n *int32) *int {
	if n == nil {
		return nil
	}
	return new(int(*n))
}

func (r *loansRoot) Applications(args struct {
	Applicant, Product *string
	Limit, Offset      *int32
}) ([]loansApp, error) {
	offset := 0
	if args.Offset != nil {
		offset = int(*args.Offset)
	}
	apps, _, err := r.l.list(loanFilter{args.Applicant, args.Product}, r.l.pageLimit(loansLimit(args.Limit)), offset)
	return wrapLoans(apps), err
}

func (r *loansRoot) ApplicationsCount(args struct{ Applicant, Product *string }) (int32, error) {
	_, total, err := r.l.list(loanFilter{args.Applicant, args.Product}, 0, 0)
	return int32(total), err
}

type loansPage struct {
	nodes []loansApp
	next  bool
	end   *string
	total int32
}

func (p loansPage) Nodes() []loansApp       { return p.nodes }
func (p loansPage) PageInfo() loansPageInfo { return loansPageInfo{p.next, p.end} }
func (p loansPage) TotalCount() int32       { return p.total }

type loansPageInfo struct {
	next bool
	end  *string
}

func (p loansPageInfo) HasNextPage() bool  { return p.next }
func (p loansPageInfo) EndCursor() *string { return p.end }

// ApplicationsPage is Relay-style cursor paging: the cursor is the last
// id read, the page holds the records after it.
func (r *loansRoot) ApplicationsPage(args struct {
	Applicant, Product *string
	First              *int32
	After              *string
}) (loansPage, error) {
	after := int64(0)
	if args.After != nil {
		n, err := strconv.ParseInt(*args.After, 10, 64)
		if err != nil {
			return loansPage{}, err
		}
		after = n
	}
	all, total, err := r.l.list(loanFilter{args.Applicant, args.Product}, -1, 0)
	if err != nil {
		return loansPage{}, err
	}
	var rest []LoanApplication
	for _, a := range all {
		if a.ID > after {
			rest = append(rest, a)
		}
	}
	limit := r.l.pageLimit(loansLimit(args.First))
	page := loansPage{total: int32(total)}
	if limit >= 0 && len(rest) > limit {
		rest, page.next = rest[:limit], true
	}
	page.nodes = wrapLoans(rest)
	if len(rest) > 0 {
		end := strconv.FormatInt(rest[len(rest)-1].ID, 10)
		page.end = &end
	}
	return page, nil
}

func (r *loansRoot) SubmitApplication(args struct{ Applicant, Product, Amount string }) (loansApp, error) {
	a, err := r.l.submit(args.Applicant, args.Product, args.Amount)
	return loansApp{a}, err
}

func (r *loansRoot) UpdateApplication(args struct {
	ID                         graphql.ID
	Applicant, Product, Amount *string
}) (loansApp, error) {
	id, err := strconv.ParseInt(string(args.ID), 10, 64)
	if err != nil {
		return loansApp{}, errNoApplication
	}
	a, err := r.l.update(id, args.Applicant, args.Product, args.Amount)
	return loansApp{a}, err
}

func (r *loansRoot) DeleteApplication(args struct{ ID graphql.ID }) (bool, error) {
	id, err := strconv.ParseInt(string(args.ID), 10, 64)
	if err != nil {
		return false, errNoApplication
	}
	return true, r.l.remove(id)
}

// GraphQL posts query with variables to the GraphQL API and returns data;
// an error answer fails the test.
func (l *Loans) GraphQL(t testing.TB, query string, vars map[string]any) json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, l.GraphQLURL, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []any           `json:"errors"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Errors) > 0 {
		t.Fatalf("graphql %s: %d %s", query, res.StatusCode, raw)
	}
	return out.Data
}

// SubmitGraphQL creates an application through the GraphQL mutation and
// returns its id.
func (l *Loans) SubmitGraphQL(t testing.TB, applicant, product, amount string) int64 {
	t.Helper()
	data := l.GraphQL(t, `mutation($a: String!, $p: String!, $m: String!) { submitApplication(applicant: $a, product: $p, amount: $m) { id } }`,
		map[string]any{"a": applicant, "p": product, "m": amount})
	var out struct {
		SubmitApplication struct{ ID string } `json:"submitApplication"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("submitApplication answered %s: %v", data, err)
	}
	id, err := strconv.ParseInt(out.SubmitApplication.ID, 10, 64)
	if err != nil {
		t.Fatalf("submitApplication answered %s", data)
	}
	return id
}

// ReassignGraphQL overwrites application id with another applicant's data
// through the GraphQL mutation (an update in place).
func (l *Loans) ReassignGraphQL(t testing.TB, id int64, applicant, product, amount string) {
	t.Helper()
	l.GraphQL(t, `mutation($id: ID!, $a: String, $p: String, $m: String) { updateApplication(id: $id, applicant: $a, product: $p, amount: $m) { id } }`,
		map[string]any{"id": strconv.FormatInt(id, 10), "a": applicant, "p": product, "m": amount})
}

// DeleteGraphQL deletes application id through the GraphQL mutation.
func (l *Loans) DeleteGraphQL(t testing.TB, id int64) {
	t.Helper()
	l.GraphQL(t, `mutation($id: ID!) { deleteApplication(id: $id) }`, map[string]any{"id": strconv.FormatInt(id, 10)})
}

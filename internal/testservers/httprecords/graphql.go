package httprecords

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"

	"github.com/verifierd/verifierd/internal/testservers"
)

// GraphQLSchema is the test GraphQL API: encounters of patients, readable
// per patient and writable through a mutation.
const GraphQLSchema = `
schema {
	query: Query
	mutation: Mutation
}

type Query {
	encounters(patientId: String!, limit: Int, offset: Int): [Encounter!]!
	encounterCount(patientId: String!): Int!
	encounterConnection(patientId: String!, first: Int, after: String): EncounterConnection!
	patient(id: String!): Patient
	encounter(id: ID!): Encounter
}

type Patient {
	id: String!
	encounters: [Encounter!]!
}

type Encounter {
	id: ID!
	patientId: String!
	type: String!
	note: String
	weightKg: Float
	updatedAt: String!
}

type EncounterConnection {
	nodes: [Encounter!]!
	pageInfo: PageInfo!
	totalCount: Int!
}

type PageInfo {
	hasNextPage: Boolean!
	endCursor: String
}

type Mutation {
	addEncounter(patientId: String!, type: String!, note: String, weightKg: Float, updatedAt: String): Encounter!
}
`

// Encounter is one record of the GraphQL store.
type Encounter struct {
	ID        graphql.ID
	PatientID string
	Type      string
	Note      *string
	WeightKg  *float64
	UpdatedAt string
}

// GraphQL is a GraphQL API over an in-memory store of encounters, served by
// graph-gophers/graphql-go at /graphql. Requests need "Authorization:
// Bearer <Token>". encounters pages by limit and offset, and answers at
// most PageCap records when no limit is asked; encounterCount is their
// total; encounterConnection pages by Relay cursors (first, after).
type GraphQL struct {
	Faults
	// URL is the endpoint (…/graphql); CAFile the PEM of its CA (TLS only).
	URL    string
	CAFile string
	Token  string

	client *http.Client
	schema *graphql.Schema

	mu         sync.Mutex
	encounters []*Encounter
	seq        int
	patients   map[string]bool
	readErrors testservers.Setting[bool]
	pageCap    testservers.Setting[int]
	errorText  testservers.Setting[string]
}

// ErrorMessage makes every request answer 400 with one GraphQL error whose
// message is msg, "{auth}" in it replaced by the Authorization header the
// request carried (as a server echoing its input does); "" turns it off.
func (g *GraphQL) ErrorMessage(msg string) { g.errorText.Set(msg) }

// PageCap makes encounters answer at most n records when the query asks
// no limit, and encounterConnection n per page when it asks no first (0:
// no cap), as a server with a default page size does.
func (g *GraphQL) PageCap(n int) { g.pageCap.Set(n) }

// NewGraphQL starts the GraphQL server for the test.
func NewGraphQL(t testing.TB, useTLS bool) *GraphQL {
	t.Helper()
	g := &GraphQL{Token: "gql-" + testservers.RandomHex(16), patients: map[string]bool{}}
	g.schema = graphql.MustParseSchema(GraphQLSchema, &gqlRoot{g: g}, graphql.UseFieldResolvers())
	mux := http.NewServeMux()
	mux.Handle("/graphql", g)
	srv, ca := start(t, mux, useTLS)
	g.URL, g.CAFile = srv.URL+"/graphql", ca
	g.client = clientFor(t, ca)
	return g
}

// ReadErrors makes every read answer with a GraphQL error (and null data),
// as a resolver whose database failed does.
func (g *GraphQL) ReadErrors(on bool) { g.readErrors.Set(on) }

// AddPatient makes patient(id) resolve for id.
func (g *GraphQL) AddPatient(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.patients[id] = true
}

// Add writes an encounter through the API's mutation and returns its id.
// updatedAt "" means now.
func (g *GraphQL) Add(t testing.TB, patientID, typ, note, updatedAt string) string {
	t.Helper()
	vars := map[string]any{"p": patientID, "t": typ, "n": note}
	if updatedAt != "" {
		vars["u"] = updatedAt
	}
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation Add($p: String!, $t: String!, $n: String, $u: String) { addEncounter(patientId: $p, type: $t, note: $n, updatedAt: $u) { id } }`,
		"variables": vars,
	})
	req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.token())
	req.Header.Set("Content-Type", "application/json")
	res, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct {
		Data struct {
			AddEncounter struct{ ID string } `json:"addEncounter"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Errors) > 0 {
		t.Fatalf("addEncounter: %d %s", res.StatusCode, raw)
	}
	return out.Data.AddEncounter.ID
}

// Insert stores an encounter directly (bulk seeding) and returns its id.
func (g *GraphQL) Insert(e Encounter) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return string(g.insertLocked(e).ID)
}

func (g *GraphQL) insertLocked(e Encounter) *Encounter {
	g.seq++
	e.ID = graphql.ID(strconv.Itoa(g.seq))
	if e.UpdatedAt == "" {
		e.UpdatedAt = time.Now().UTC().Format(time.RFC3339)
	}
	g.encounters = append(g.encounters, &e)
	return &e
}

// Reset deletes every encounter.
func (g *GraphQL) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.encounters = nil
}

func (g *GraphQL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.apply(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+g.token() {
		w.Header().Set("WWW-Authenticate", `Bearer realm="graphql"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"errors": []any{map[string]any{
			"message": "authentication required: send a valid bearer token", "extensions": map[string]any{"code": "UNAUTHENTICATED"},
		}}})
		return
	}
	if st := g.failure(); st != 0 {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(st)
		w.Write([]byte("upstream resolver pool exhausted\n"))
		return
	}
	if msg := g.errorText.Get(); msg != "" {
		msg = strings.ReplaceAll(msg, "{auth}", r.Header.Get("Authorization"))
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []any{map[string]any{"message": msg, "locations": []any{map[string]any{"line": 2, "column": 3}}}}})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST a JSON body", http.StatusMethodNotAllowed)
		return
	}
	(&relay.Handler{Schema: g.schema}).ServeHTTP(w, r)
}

type gqlRoot struct{ g *GraphQL }

var errStoreDown = errors.New("encounter store: connection reset by peer")

func (r *gqlRoot) readable() error {
	if r.g.readErrors.Get() {
		return errStoreDown
	}
	return nil
}

func (r *gqlRoot) of(patientID string) []*Encounter {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	var out []*Encounter
	for _, e := range r.g.encounters {
		if e.PatientID == patientID {
			out = append(out, e)
		}
	}
	return out
}

func (r *gqlRoot) Encounters(args struct {
	PatientID     string
	Limit, Offset *int32
}) ([]*Encounter, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	all := r.of(args.PatientID)
	if args.Offset != nil {
		all = all[min(max(int(*args.Offset), 0), len(all)):]
	}
	n := r.g.pageCap.Get()
	if args.Limit != nil {
		n = int(*args.Limit)
	}
	if n > 0 && n < len(all) {
		all = all[:n]
	}
	return all, nil
}

func (r *gqlRoot) EncounterCount(args struct{ PatientID string }) (int32, error) {
	if err := r.readable(); err != nil {
		return 0, err
	}
	return int32(len(r.of(args.PatientID))), nil
}

// gqlConnection is a Relay connection of encounters.
type gqlConnection struct {
	Nodes      []*Encounter
	PageInfo   *gqlPageInfo
	TotalCount int32
}

type gqlPageInfo struct {
	HasNextPage bool
	EndCursor   *string
}

// EncounterConnection pages by cursor: a cursor is the id of the last
// encounter of the page before.
func (r *gqlRoot) EncounterConnection(args struct {
	PatientID string
	First     *int32
	After     *string
}) (*gqlConnection, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	all := r.of(args.PatientID)
	rest := all
	if args.After != nil {
		rest = nil
		for i, e := range all {
			if string(e.ID) == *args.After {
				rest = all[i+1:]
			}
		}
		if rest == nil && len(all) > 0 && string(all[len(all)-1].ID) != *args.After {
			return nil, errors.New("unknown cursor " + *args.After)
		}
	}
	n := r.g.pageCap.Get()
	if args.First != nil {
		n = int(*args.First)
	}
	page, more := rest, false
	if n > 0 && n < len(rest) {
		page, more = rest[:n], true
	}
	info := &gqlPageInfo{HasNextPage: more}
	if len(page) > 0 {
		c := string(page[len(page)-1].ID)
		info.EndCursor = &c
	}
	return &gqlConnection{Nodes: page, PageInfo: info, TotalCount: int32(len(all))}, nil
}

func (r *gqlRoot) Patient(args struct{ ID string }) (*gqlPatient, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	r.g.mu.Lock()
	known := r.g.patients[args.ID]
	r.g.mu.Unlock()
	if !known {
		return nil, nil
	}
	return &gqlPatient{ID: args.ID, root: r}, nil
}

func (r *gqlRoot) Encounter(args struct{ ID graphql.ID }) (*Encounter, error) {
	if err := r.readable(); err != nil {
		return nil, err
	}
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	for _, e := range r.g.encounters {
		if e.ID == args.ID {
			return e, nil
		}
	}
	return nil, nil
}

func (r *gqlRoot) AddEncounter(args struct {
	PatientID string
	Type      string
	Note      *string
	WeightKg  *float64
	UpdatedAt *string
}) *Encounter {
	e := Encounter{PatientID: args.PatientID, Type: args.Type, Note: args.Note, WeightKg: args.WeightKg}
	if args.UpdatedAt != nil {
		e.UpdatedAt = *args.UpdatedAt
	}
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	return r.g.insertLocked(e)
}

type gqlPatient struct {
	ID   string
	root *gqlRoot
}

func (p *gqlPatient) Encounters() []*Encounter { return p.root.of(p.ID) }

// Rotate replaces the accepted bearer token: the old one is refused from
// now on, as after a revocation.
func (g *GraphQL) Rotate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Token = "gql-" + testservers.RandomHex(16)
}

func (g *GraphQL) token() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Token
}

package httprecords

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver the sql adapter reads with too

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// LoansDefaultCap is how many records a Loans list answers when the request
// does not say how many it wants, as the application in issue 24 did.
const LoansDefaultCap = 100

// Loans is a loan-application system of record with the faults of sound
// reads: one database (an SQLite file, DBPath, or a table in a PostgreSQL
// database), a JSON REST API and a GraphQL API over it, so one write is
// seen by all three kinds of read (the sql adapter reads the database).
//
//	GET    /api/applications?applicant=&product=&limit=N&offset=N  -> {"data": [...], "total": N}, header X-Total-Count
//	POST   /api/applications           {"applicant", "product", "amount"}  -> 201 {"data": {...}}
//	PUT    /api/applications/<id>      any of the three fields: updates the record in place (no new row)
//	DELETE /api/applications/<id>
//	POST   /graphql                    LoansGraphQLSchema
//
// Requests need "Authorization: Bearer <Token>". A record is {"id": 7,
// "applicant": "a-1", "product": "car", "amount": 1234.5, "created_at":
// RFC 3339}, listed in id order.
//
// The faults, each one a real application's behaviour:
//   - a page cap: a list that names no limit (REST limit, GraphQL limit or
//     first) answers at most the cap (LoansDefaultCap unless SetPageCap),
//     while its total still counts every match;
//   - amounts in a REAL column: "1234.50" is stored as binary floating
//     point and read back 1234.5, through every API;
//   - a late duplicate (SetLateDuplicate): every submit is stored a second
//     time a moment later, as a retried queue message would be;
//   - the re-assigning update and the deletion are ordinary routes: the
//     fault is the automation's, calling them.
type Loans struct {
	Faults
	// URL is the REST base URL, GraphQLURL the GraphQL endpoint; CAFile
	// the PEM of their CA (TLS only).
	URL, GraphQLURL, CAFile string
	// Token is the bearer token every request must carry.
	Token string
	// DBPath is the SQLite database file ("" over PostgreSQL).
	DBPath string

	client *http.Client
	db     *sql.DB
	pg     bool // the store is PostgreSQL (placeholders $n, no LIMIT -1)
	schema *graphql.Schema
	// mu serializes writes, so that ids are handed out in order.
	mu       sync.Mutex
	cap      testservers.Setting[int]
	lateDup  testservers.Setting[time.Duration]
	inFlight sync.WaitGroup
}

// LoanApplication is one record of the Loans store.
type LoanApplication struct {
	ID        int64   `json:"id"`
	Applicant string  `json:"applicant"`
	Product   string  `json:"product"`
	Amount    float64 `json:"amount"`
	CreatedAt string  `json:"created_at"`
}

// The applications table: the amount is binary floating point (REAL,
// double precision), the fault of a decimal stored as a float.
const (
	loansDDL = `CREATE TABLE applications (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	applicant TEXT NOT NULL,
	product TEXT NOT NULL,
	amount REAL NOT NULL,
	created_at TEXT NOT NULL
)`
	loansPostgresDDL = `CREATE TABLE applications (
	id bigserial PRIMARY KEY,
	applicant text NOT NULL,
	product text NOT NULL,
	amount double precision NOT NULL,
	created_at text NOT NULL
)`
)

// NewLoans starts the Loans server for the test over a new SQLite
// database (DBPath), with an empty store and the default page cap.
func NewLoans(t testing.TB, useTLS bool) *Loans {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loans.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(loansDDL); err != nil {
		t.Fatalf("creating the loans database: %v", err)
	}
	l := serveLoans(t, db, useTLS)
	l.DBPath = path
	return l
}

// NewLoansPostgres starts the Loans server for the test over the
// applications table it creates in pg's database, as pg's administrator
// (the reader account may SELECT it).
func NewLoansPostgres(t testing.TB, useTLS bool, pg *sqlservers.Postgres) *Loans {
	t.Helper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable", pg.Port, pg.Database, pg.Admin.User))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = pg.Admin.Password
	db := stdlib.OpenDB(*cfg)
	if _, err := db.Exec(loansPostgresDDL); err != nil {
		db.Close()
		t.Fatalf("creating the loans table: %v", err)
	}
	l := serveLoans(t, db, useTLS)
	l.pg = true
	return l
}

func serveLoans(t testing.TB, db *sql.DB, useTLS bool) *Loans {
	l := &Loans{Token: "loans-" + testservers.RandomHex(16), db: db}
	l.cap.Set(LoansDefaultCap)
	// Registered before the server starts, so it runs after the server
	// closed: no late duplicate outlives the test.
	t.Cleanup(func() {
		l.inFlight.Wait()
		db.Close()
	})
	l.schema = mustLoansSchema(l)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/applications", l.serveREST)
	mux.HandleFunc("/api/applications/", l.serveREST)
	mux.HandleFunc("/graphql", l.serveGraphQL)
	srv, ca := start(t, mux, useTLS)
	l.URL, l.GraphQLURL, l.CAFile = srv.URL, srv.URL+"/graphql", ca
	l.client = clientFor(t, ca)
	return l
}

// q is query for the store's engine: ? placeholders become $1, $2, … on
// PostgreSQL.
func (l *Loans) q(query string) string {
	if !l.pg {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// all is the LIMIT value that means no limit.
func (l *Loans) all() any {
	if l.pg {
		return nil
	}
	return -1
}

// SetPageCap sets how many records a list that names no limit answers (0:
// all of them).
func (l *Loans) SetPageCap(n int) { l.cap.Set(n) }

// SetLateDuplicate makes every later submit land a second time d after it
// was answered (0: never).
func (l *Loans) SetLateDuplicate(d time.Duration) { l.lateDup.Set(d) }

// Insert stores an application directly (seeding) and returns its id.
// amount is decimal text; it is stored as REAL, as the API stores it.
func (l *Loans) Insert(t testing.TB, applicant, product, amount string) int64 {
	t.Helper()
	id, err := l.insert(applicant, product, amount)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Seed stores n applications of distinct applicants prefix-0 …
// prefix-(n-1), product "car", amount 1000, in one transaction.
func (l *Loans) Seed(t testing.TB, prefix string, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range n {
		if _, err := tx.Exec(l.q(`INSERT INTO applications (applicant, product, amount, created_at) VALUES (?, 'car', 1000.0, ?)`),
			fmt.Sprintf("%s-%d", prefix, i), now); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Reset deletes every application; ids keep growing.
func (l *Loans) Reset(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.db.Exec(`DELETE FROM applications`); err != nil {
		t.Fatal(err)
	}
}

// All returns every application in id order, straight from the database.
func (l *Loans) All(t testing.TB) []LoanApplication {
	t.Helper()
	apps, _, err := l.list(loanFilter{}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return apps
}

// WaitIdle waits until every late duplicate scheduled so far has landed.
func (l *Loans) WaitIdle() { l.inFlight.Wait() }

func (l *Loans) insert(applicant, product, amount string) (int64, error) {
	v, err := parseAmount(amount)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var id int64
	err = l.db.QueryRow(l.q(`INSERT INTO applications (applicant, product, amount, created_at) VALUES (?, ?, ?, ?) RETURNING id`),
		applicant, product, v, time.Now().UTC().Format(time.RFC3339Nano)).Scan(&id)
	return id, err
}

// submit is the API's create: an insert, and the late duplicate when set.
func (l *Loans) submit(applicant, product, amount string) (LoanApplication, error) {
	id, err := l.insert(applicant, product, amount)
	if err != nil {
		return LoanApplication{}, err
	}
	if d := l.lateDup.Get(); d > 0 {
		l.inFlight.Add(1)
		time.AfterFunc(d, func() {
			defer l.inFlight.Done()
			// The late duplicate is the fault itself; a failed insert shows
			// in the test's counts, as a missing duplicate.
			_, _ = l.insert(applicant, product, amount)
		})
	}
	return l.get(id)
}

var errNoApplication = errors.New("no such application")

// update sets the non-nil fields of application id in place.
func (l *Loans) update(id int64, applicant, product, amount *string) (LoanApplication, error) {
	var amt any
	if amount != nil {
		v, err := parseAmount(*amount)
		if err != nil {
			return LoanApplication{}, err
		}
		amt = v
	}
	l.mu.Lock()
	res, err := l.db.Exec(l.q(`UPDATE applications SET applicant = coalesce(CAST(? AS TEXT), applicant), product = coalesce(CAST(? AS TEXT), product), amount = coalesce(CAST(? AS DOUBLE PRECISION), amount) WHERE id = ?`),
		loansNullable(applicant), loansNullable(product), amt, id)
	l.mu.Unlock()
	if err != nil {
		return LoanApplication{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return LoanApplication{}, errNoApplication
	}
	return l.get(id)
}

func (l *Loans) remove(id int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	res, err := l.db.Exec(l.q(`DELETE FROM applications WHERE id = ?`), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errNoApplication
	}
	return nil
}

func (l *Loans) get(id int64) (LoanApplication, error) {
	var a LoanApplication
	err := l.db.QueryRow(l.q(`SELECT id, applicant, product, amount, created_at FROM applications WHERE id = ?`), id).
		Scan(&a.ID, &a.Applicant, &a.Product, &a.Amount, &a.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return a, errNoApplication
	}
	return a, err
}

// loanFilter selects applications; a nil field selects any value.
type loanFilter struct{ applicant, product *string }

// list answers the applications the filter selects, in id order, from
// offset, at most limit of them (limit < 0: all), and how many it selects
// in all.
func (l *Loans) list(f loanFilter, limit, offset int) ([]LoanApplication, int, error) {
	where, args := "WHERE (CAST(? AS TEXT) IS NULL OR applicant = CAST(? AS TEXT)) AND (CAST(? AS TEXT) IS NULL OR product = CAST(? AS TEXT))",
		[]any{loansNullable(f.applicant), loansNullable(f.applicant), loansNullable(f.product), loansNullable(f.product)}
	var total int
	if err := l.db.QueryRow(l.q(`SELECT count(*) FROM applications `+where), args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	var lim any = limit
	if limit < 0 {
		lim = l.all()
	}
	rows, err := l.db.Query(l.q(`SELECT id, applicant, product, amount, created_at FROM applications `+where+` ORDER BY id LIMIT ? OFFSET ?`),
		append(args, lim, offset)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []LoanApplication{}
	for rows.Next() {
		var a LoanApplication
		if err := rows.Scan(&a.ID, &a.Applicant, &a.Product, &a.Amount, &a.CreatedAt); err != nil {
			return nil, 0, err
		}
		out = append(out, a)
	}
	return out, total, rows.Err()
}

// pageLimit is the limit a list request gets: what it asked for, else the
// page cap (0: no cap).
func (l *Loans) pageLimit(asked *int) int {
	if asked != nil {
		return *asked
	}
	if c := l.cap.Get(); c > 0 {
		return c
	}
	return -1
}

func loansNullable(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// parseAmount accepts decimal text (or a JSON number's text) and returns
// the float64 the REAL column stores: the fault is that binary floating
// point keeps no trailing zeros.
func parseAmount(s string) (float64, error) {
	if _, ok := new(big.Rat).SetString(s); !ok || strings.ContainsAny(s, " /_") {
		return 0, fmt.Errorf("amount %q is not a decimal number", s)
	}
	return strconv.ParseFloat(s, 64)
}

func (l *Loans) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "Bearer "+l.Token {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="loans"`)
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "a valid bearer token is required"})
	return false
}

func (l *Loans) serveREST(w http.ResponseWriter, r *http.Request) {
	if l.apply(w, r) || !l.authorized(w, r) {
		return
	}
	if st := l.failure(); st != 0 {
		writeJSON(w, st, map[string]any{"error": "database is locked"})
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/api/applications"), "/")
	if rest == "" {
		switch r.Method {
		case http.MethodGet:
			l.restList(w, r)
		case http.MethodPost:
			l.restSubmit(w, r)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "GET or POST"})
		}
		return
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such route"})
		return
	}
	switch r.Method {
	case http.MethodGet:
		a, err := l.get(id)
		l.answer(w, http.StatusOK, a, err)
	case http.MethodPut:
		var body struct{ Applicant, Product, Amount *string }
		if err := decodeLoan(r, &body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		}
		a, err := l.update(id, body.Applicant, body.Product, body.Amount)
		l.answer(w, http.StatusOK, a, err)
	case http.MethodDelete:
		if err := l.remove(id); err != nil {
			l.answer(w, 0, LoanApplication{}, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "GET, PUT or DELETE"})
	}
}

func (l *Loans) restList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f loanFilter
	if q.Has("applicant") {
		v := q.Get("applicant")
		f.applicant = &v
	}
	if q.Has("product") {
		v := q.Get("product")
		f.product = &v
	}
	var asked *int
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "limit must be a positive integer"})
			return
		}
		asked = &n
	}
	offset := 0
	if q.Has("offset") {
		n, err := strconv.Atoi(q.Get("offset"))
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "offset must be a non-negative integer"})
			return
		}
		offset = n
	}
	apps, total, err := l.list(f, l.pageLimit(asked), offset)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(total))
	writeJSON(w, http.StatusOK, map[string]any{"data": apps, "total": total})
}

func (l *Loans) restSubmit(w http.ResponseWriter, r *http.Request) {
	var body struct{ Applicant, Product, Amount string }
	if err := decodeLoan(r, &body); err != nil || body.Applicant == "" || body.Product == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "applicant, product and amount are required"})
		return
	}
	a, err := l.submit(body.Applicant, body.Product, body.Amount)
	l.answer(w, http.StatusCreated, a, err)
}

// decodeLoan reads a JSON body whose amount may be a string or a number.
func decodeLoan(r *http.Request, v any) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	var generic map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return fmt.Errorf("the body must be a JSON object: %v", err)
	}
	if n, ok := generic["amount"].(json.Number); ok {
		generic["amount"] = n.String()
	}
	raw, _ = json.Marshal(generic)
	return json.Unmarshal(raw, v)
}

func (l *Loans) answer(w http.ResponseWriter, status int, a LoanApplication, err error) {
	switch {
	case errors.Is(err, errNoApplication):
		writeJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error()})
	default:
		writeJSON(w, status, map[string]any{"data": a})
	}
}

// Submit creates an application through the REST API, as the automation
// would, and returns it.
func (l *Loans) Submit(t testing.TB, applicant, product, amount string) LoanApplication {
	t.Helper()
	return l.call(t, http.MethodPost, "/api/applications", map[string]any{"applicant": applicant, "product": product, "amount": amount}, http.StatusCreated)
}

// Reassign overwrites application id with another applicant's data through
// the REST API (an UPDATE: no new row), and returns it.
func (l *Loans) Reassign(t testing.TB, id int64, applicant, product, amount string) LoanApplication {
	t.Helper()
	return l.call(t, http.MethodPut, "/api/applications/"+strconv.FormatInt(id, 10), map[string]any{"applicant": applicant, "product": product, "amount": amount}, http.StatusOK)
}

// Delete deletes application id through the REST API.
func (l *Loans) Delete(t testing.TB, id int64) {
	t.Helper()
	l.call(t, http.MethodDelete, "/api/applications/"+strconv.FormatInt(id, 10), nil, http.StatusNoContent)
}

// List GETs the REST list with the given query (e.g. "limit=500") and
// returns its records, its total and the X-Total-Count header.
func (l *Loans) List(t testing.TB, query string) (apps []json.RawMessage, total int, header string) {
	t.Helper()
	res := l.do(t, http.MethodGet, "/api/applications?"+query, nil)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct {
		Data  []json.RawMessage `json:"data"`
		Total int               `json:"total"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("GET /api/applications?%s: %d %s", query, res.StatusCode, raw)
	}
	return out.Data, out.Total, res.Header.Get("X-Total-Count")
}

func (l *Loans) call(t testing.TB, method, path string, body any, want int) LoanApplication {
	t.Helper()
	res := l.do(t, method, path, body)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, raw, want)
	}
	var out struct {
		Data LoanApplication `json:"data"`
	}
	if want != http.StatusNoContent {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return out.Data
}

func (l *Loans) do(t testing.TB, method, path string, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, l.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

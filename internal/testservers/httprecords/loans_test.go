package httprecords

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// TestLoansFaults: each fault of the Loans server, seen through REST,
// GraphQL and the SQLite file the sql adapter reads.
func TestLoansFaults(t *testing.T) {
	l := NewLoans(t, true)
	db, err := sql.Open("sqlite", "file:"+l.DBPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rows := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM applications`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("page cap", func(t *testing.T) {
		l.Reset(t)
		l.Seed(t, "old", 99)
		l.Submit(t, "a-1", "car", "1000.00")
		l.Submit(t, "a-1", "car", "1000.00")
		if n := rows(); n != 101 {
			t.Fatalf("rows = %d, want 101", n)
		}
		for _, tc := range []struct {
			query string
			want  int
		}{{"", 100}, {"limit=500", 101}, {"limit=40&offset=80", 21}, {"applicant=a-1", 2}} {
			apps, total, header := l.List(t, tc.query)
			wantTotal := 101
			if tc.query == "applicant=a-1" {
				wantTotal = 2
			}
			if len(apps) != tc.want || total != wantTotal || header != strconv.Itoa(wantTotal) {
				t.Errorf("list %q: %d records, total %d, X-Total-Count %q; want %d, %d", tc.query, len(apps), total, header, tc.want, wantTotal)
			}
		}
		var gql struct {
			Capped []struct{ ID string } `json:"capped"`
			All    []struct{ ID string } `json:"all"`
			Count  int                   `json:"applicationsCount"`
			Page   struct {
				Nodes    []struct{ ID string } `json:"nodes"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
				TotalCount int `json:"totalCount"`
			} `json:"applicationsPage"`
		}
		data := l.GraphQL(t, `{ capped: applications { id } all: applications(limit: 500) { id } applicationsCount
			applicationsPage(first: 40, after: "60") { nodes { id } pageInfo { hasNextPage endCursor } totalCount } }`, nil)
		if err := json.Unmarshal(data, &gql); err != nil {
			t.Fatal(err)
		}
		if len(gql.Capped) != 100 || len(gql.All) != 101 || gql.Count != 101 {
			t.Errorf("graphql: capped %d, all %d, count %d; want 100, 101, 101", len(gql.Capped), len(gql.All), gql.Count)
		}
		if p := gql.Page; len(p.Nodes) != 40 || !p.PageInfo.HasNextPage || p.PageInfo.EndCursor == nil || p.TotalCount != 101 {
			t.Errorf("graphql page: %d nodes, next %v, total %d", len(p.Nodes), p.PageInfo.HasNextPage, p.TotalCount)
		}
		l.SetPageCap(0)
		defer l.SetPageCap(LoansDefaultCap)
		if apps, _, _ := l.List(t, ""); len(apps) != 101 {
			t.Errorf("uncapped list: %d records, want 101", len(apps))
		}
	})

	t.Run("re-assign and delete", func(t *testing.T) {
		l.Reset(t)
		other := l.Insert(t, "b-1", "car", "500.00")
		kept := l.Insert(t, "b-2", "car", "600.00")
		got := l.Reassign(t, other, "a-2", "car", "1234.50")
		if got.ID != other || got.Applicant != "a-2" || rows() != 2 {
			t.Errorf("re-assign: %+v, %d rows; want id %d now a-2's, 2 rows", got, rows(), other)
		}
		l.ReassignGraphQL(t, other, "a-3", "home", "1.00")
		l.Delete(t, kept)
		if all := l.All(t); len(all) != 1 || all[0].ID != other || all[0].Applicant != "a-3" || all[0].Product != "home" {
			t.Errorf("after re-assign and delete: %+v", all)
		}
		l.DeleteGraphQL(t, other)
		if n := rows(); n != 0 {
			t.Errorf("rows after the GraphQL delete = %d", n)
		}
	})

	t.Run("decimal stored as float", func(t *testing.T) {
		l.Reset(t)
		id := l.Submit(t, "a-4", "car", "1234.50").ID
		l.SubmitGraphQL(t, "a-5", "car", "1234.50")
		var text, typ string
		if err := db.QueryRow(`SELECT CAST(amount AS TEXT), typeof(amount) FROM applications WHERE id = ?`, id).Scan(&text, &typ); err != nil {
			t.Fatal(err)
		}
		if text != "1234.5" || typ != "real" {
			t.Errorf("stored amount %q (%s), want 1234.5 (real)", text, typ)
		}
		apps, _, _ := l.List(t, "applicant=a-4")
		if len(apps) != 1 || !strings.Contains(string(apps[0]), `"amount":1234.5,`) {
			t.Errorf("REST record %s, want amount 1234.5", apps)
		}
		data := l.GraphQL(t, `{ applications(applicant: "a-5") { id amount } }`, nil)
		if !strings.Contains(string(data), `"amount":1234.5}`) || !strings.Contains(string(data), `"id":"`) {
			t.Errorf("GraphQL records %s, want amount 1234.5 and a string id", data)
		}
	})

	t.Run("late duplicate", func(t *testing.T) {
		l.Reset(t)
		l.SetLateDuplicate(300 * time.Millisecond)
		defer l.SetLateDuplicate(0)
		l.Submit(t, "a-6", "car", "10.00")
		if n := rows(); n != 1 {
			t.Fatalf("rows right after the submit = %d, want 1", n)
		}
		l.WaitIdle()
		if all := l.All(t); len(all) != 2 || all[1].Applicant != "a-6" {
			t.Errorf("after the late duplicate: %+v, want two of a-6", all)
		}
	})

	t.Run("bearer token required", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, l.URL+"/api/applications", nil)
		req.Header.Set("Authorization", "Bearer wrong")
		res, err := l.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("with a wrong token: %d, want 401", res.StatusCode)
		}
	})
}

// TestLoansPostgres: the same store over a real PostgreSQL table (double
// precision amounts), as the e2e cases use it through the sql adapter.
func TestLoansPostgres(t *testing.T) {
	parent, err := os.MkdirTemp("", "loans-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		t.Fatalf("PostgreSQL could not start: %v", err)
	}
	l := NewLoansPostgres(t, false, pg)
	l.Seed(t, "old", 99)
	first := l.Submit(t, "a-1", "car", "1234.50")
	l.SubmitGraphQL(t, "a-1", "car", "1234.50")
	if apps, total, header := l.List(t, ""); len(apps) != 100 || total != 101 || header != "101" {
		t.Errorf("unasked list: %d records, total %d, X-Total-Count %s; want 100, 101, 101", len(apps), total, header)
	}
	if apps, _, _ := l.List(t, "limit=1000"); len(apps) != 101 {
		t.Errorf("asked list: %d records, want 101", len(apps))
	}
	if data := l.GraphQL(t, `{ applications(applicant: "a-1", limit: 1) { id amount } }`, nil); !strings.Contains(string(data), `"amount":1234.5}`) {
		t.Errorf("GraphQL answered %s, want amount 1234.5", data)
	}
	l.Reassign(t, first.ID, "a-2", "home", "99.90")
	l.Delete(t, first.ID+1)
	all := l.All(t)
	if len(all) != 100 || all[99].ID != first.ID || all[99].Applicant != "a-2" || all[99].Amount != 99.9 {
		t.Errorf("after re-assign and delete: %d records, last %+v", len(all), all[len(all)-1])
	}
	l.SetLateDuplicate(100 * time.Millisecond)
	l.Submit(t, "a-3", "car", "1.00")
	l.SetLateDuplicate(0)
	l.WaitIdle()
	if apps, _, _ := l.List(t, "applicant=a-3"); len(apps) != 2 {
		t.Errorf("late duplicate: %d records of a-3, want 2", len(apps))
	}
}

package httprecords

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
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

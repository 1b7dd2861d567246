package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/inflight"
)

// countingBody counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingBody) Close() error { return nil }

// The token is checked before any body byte is read or any budget drawn;
// an authenticated body over the route's limit is refused on its declared
// length; one that finds the budget spent is 429; what a request drew is
// given back however it ends.
func TestBodyAfterToken(t *testing.T) {
	budget := inflight.New(1 << 20)
	a := New("tok")
	a.SetBudget(budget)
	var served int
	a.Handle("POST /x", func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		served = len(data)
		if budget.InUse() < int64(served) {
			t.Errorf("the handler runs with %d bytes drawn for a body of %d", budget.InUse(), served)
		}
	})
	send := func(token string, size int, declared int64) (*httptest.ResponseRecorder, *countingBody) {
		body := &countingBody{r: bytes.NewReader(bytes.Repeat([]byte(" "), size))}
		r := httptest.NewRequest("POST", "http://127.0.0.1/x", body)
		r.ContentLength = declared
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		return w, body
	}
	w, body := send("", 100, 16<<20)
	if w.Code != http.StatusUnauthorized || w.Header().Get("Connection") != "close" || body.read != 0 || budget.InUse() != 0 {
		t.Fatalf("without the token: %d, Connection %q, %d body bytes read, %d drawn", w.Code, w.Header().Get("Connection"), body.read, budget.InUse())
	}
	w, body = send("tok", 100, MaxBodyBytes+1)
	if w.Code != http.StatusRequestEntityTooLarge || body.read != 0 {
		t.Fatalf("declaring more than the route takes: %d, %d bytes read", w.Code, body.read)
	}
	w, _ = send("tok", 300<<10, 300<<10)
	if w.Code != http.StatusOK || served != 300<<10 || budget.InUse() != 0 {
		t.Fatalf("a 300 KiB body: %d, served %d, %d still drawn", w.Code, served, budget.InUse())
	}
	other, err := budget.Hold(context.Background(), 900<<10)
	if err != nil {
		t.Fatal(err)
	}
	w, _ = send("tok", 300<<10, -1)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "--max-inflight-bytes") || budget.InUse() != 900<<10 {
		t.Fatalf("a body past the budget's room: %d %s, %d drawn", w.Code, w.Body, budget.InUse())
	}
	other.Release()
}

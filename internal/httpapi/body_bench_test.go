package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/verifierd/verifierd/internal/inflight"
)

// BenchmarkReadBody reads a 1 MiB body through a route: drawn from the
// budget a chunk at a time (readBody, now) against reading it whole
// behind http.MaxBytesReader after one reservation of its declared length
// (before).
func BenchmarkReadBody(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	budget := inflight.New(inflight.DefaultBytes)
	a := New("tok")
	a.SetBudget(budget)
	a.Handle("POST /b", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	request := func() *http.Request {
		r := httptest.NewRequest("POST", "/b", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	b.Run("chunked draw", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			w := httptest.NewRecorder()
			a.ServeHTTP(w, request())
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
	b.Run("one reservation", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			r := request()
			release, err := budget.Reserve(r.Context(), r.ContentLength)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(http.MaxBytesReader(httptest.NewRecorder(), r.Body, MaxBodyBytes))
			if err != nil || len(data) != len(body) {
				b.Fatal(err)
			}
			release()
		}
	})
}

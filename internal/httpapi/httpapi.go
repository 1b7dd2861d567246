// Package httpapi is the daemon's HTTP listener (verifierd --http-listen):
// one http.ServeMux that feature packages join with their routes, behind
// the daemon's bearer token (compared in constant time). Errors are JSON
// {error, detail} bodies, except on the VerifierService gateway routes,
// which answer the gRPC status as JSON. The reward routes live in
// reward.go, the gateway in gateway.go, the browser checks every request
// passes first (Host allowlist, JSON-only state changes, same origin) in
// guard.go.
package httpapi

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/version"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// API is the HTTP listener's mux.
type API struct {
	mux    *http.ServeMux
	token  string
	hosts  Hosts
	budget *inflight.Budget
}

// SetBudget makes every request body reserve its size from b before it is
// read (the daemon's --max-inflight-bytes, shared with gRPC): a body of
// unknown length reserves the route's whole body limit. When the budget
// stays spent for inflight.MaxWait the request is refused with 429 and
// Retry-After. Call it before serving.
func (a *API) SetBudget(b *inflight.Budget) { a.budget = b }

// New returns an API requiring token as "Authorization: Bearer <token>" on
// every route joined with Handle (none when token is empty).
func New(token string) *API {
	a := &API{mux: http.NewServeMux(), token: token}
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": "verifierd", "version": version.Get().Version})
	})
	return a
}

// AllowHosts sets the Host names the listener answers for besides the
// loopback ones (--http-allowed-hosts; see ParseHosts).
func (a *API) AllowHosts(h Hosts) {
	a.hosts = h
}

// Handle joins a route (an http.ServeMux pattern such as "POST /v1/x")
// behind the bearer token.
func (a *API) Handle(pattern string, h http.HandlerFunc) {
	a.handle(pattern, MaxBodyBytes, h)
}

func (a *API) handle(pattern string, maxBody int64, h http.HandlerFunc) {
	a.handleOpen(pattern, maxBody, func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			WriteError(w, http.StatusUnauthorized, "unauthorized", "send the API token as 'Authorization: Bearer <token>'")
			return
		}
		h(w, r)
	})
}

// handleOpen joins a route whose handler checks the token itself (the
// gateway's, through the gRPC interceptor chain), with the body bound and
// the budget reservation every route has.
func (a *API) handleOpen(pattern string, maxBody int64, h http.HandlerFunc) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if n := bodyReservation(r, maxBody); n > 0 && a.budget != nil {
			release, err := a.budget.Reserve(r.Context(), n)
			if err != nil {
				if status.Code(err) != codes.ResourceExhausted {
					return // the client went away while it waited
				}
				w.Header().Set("Retry-After", "1")
				WriteError(w, http.StatusTooManyRequests, "resource_exhausted", status.Convert(err).Message())
				return
			}
			defer release()
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r)
	})
}

// bodyReservation is what a request reserves: its declared length, or the
// route's body limit when the length is unknown (chunked) or over it.
func bodyReservation(r *http.Request, maxBody int64) int64 {
	if r.Body == nil || r.Body == http.NoBody {
		return 0
	}
	if r.ContentLength >= 0 && r.ContentLength <= maxBody {
		return r.ContentLength
	}
	return maxBody
}

func (a *API) authorized(r *http.Request) bool {
	if a.token == "" {
		return true
	}
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(a.token)) == 1
}

// ServeHTTP serves the mux behind the browser checks (checkHost, checkWrite); an unknown
// route is a JSON 404. Every answer tells a browser not to sniff it, frame
// it or hand it to another origin's page.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !a.checkHost(w, r) {
		return
	}
	if _, pattern := a.mux.Handler(r); pattern == "" {
		// The mux's own answer decides between 404 and 405 (with Allow);
		// the body is ours, in the {error, detail} shape.
		rec := &statusOnly{header: w.Header()}
		a.mux.ServeHTTP(rec, r)
		if rec.code == http.StatusMethodNotAllowed {
			WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "this route takes "+w.Header().Get("Allow"))
			return
		}
		WriteError(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	if !a.checkWrite(w, r) {
		return
	}
	a.mux.ServeHTTP(w, r)
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes {error, detail}.
func WriteError(w http.ResponseWriter, status int, code, detail string) {
	WriteJSON(w, status, map[string]string{"error": code, "detail": detail})
}

// statusOnly records the status the mux would answer, keeping its headers
// (Allow) and dropping its plain-text body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }

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

	"github.com/verifierd/verifierd/internal/connlimit"
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
	ready  func() error

	bodyLimits      BodyLimits
	maxJudgeRecords int
}

// SetMaxJudgeRecords bounds the records of one POST /v1/judge body,
// before and after together (--max-judge-records; 0: no bound). They are
// counted while the body is walked, before any record is built; over the
// bound the answer is 413 naming the flag. Call it before serving.
func (a *API) SetMaxJudgeRecords(n int) { a.maxJudgeRecords = n }

// SetBudget makes every request body draw on b as it arrives (the
// daemon's --max-inflight-bytes, shared with gRPC): a chunk at a time, not
// the declared length up front, and only once the request passed the
// token check. When the budget stays spent for inflight.MaxWait the
// request is refused with 429 and Retry-After. Call it before serving.
func (a *API) SetBudget(b *inflight.Budget) { a.budget = b }

// New returns an API requiring token as "Authorization: Bearer <token>" on
// every route joined with Handle (none when token is empty).
func New(token string) *API {
	a := &API{mux: http.NewServeMux(), token: token}
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		if a.ready != nil {
			if err := a.ready(); err != nil {
				WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "service": "verifierd", "reason": err.Error(), "version": version.Get().Version})
				return
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": "verifierd", "version": version.Get().Version})
	})
	return a
}

// SetReady makes GET /health answer 503 "not_ready" with the reason while
// ready answers an error (the store's keys changed under this replica).
// Call it before serving.
func (a *API) SetReady(ready func() error) { a.ready = ready }

// AllowHosts sets the Host names the listener answers for besides the
// loopback ones (--http-allowed-hosts; see ParseHosts).
func (a *API) AllowHosts(h Hosts) {
	a.hosts = h
}

// Handle joins a route (an http.ServeMux pattern such as "POST /v1/x")
// behind the bearer token, with a body of at most MaxBodyBytes.
func (a *API) Handle(pattern string, h http.HandlerFunc) {
	a.route(pattern, MaxBodyBytes, unauthorized, h)
}

// unauthorized is the 401 of the listener's own routes.
func unauthorized(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	WriteError(w, http.StatusUnauthorized, "unauthorized", "send the API token as 'Authorization: Bearer <token>'")
}

// route joins a route in the order that keeps an unauthenticated client's
// cost at its headers: the token is checked first (refuse answers a
// request without it, and the connection is closed), then the body is read
// whole, at most maxBody bytes, drawing on the budget as it arrives and at
// the minimum rate (readBody), and only then does h run, with the body in
// memory. The body's bytes stay reserved until h returns.
func (a *API) route(pattern string, maxBody int64, refuse http.HandlerFunc, h http.HandlerFunc) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r) {
			connlimit.MarkRefused(r.Context())
			w.Header().Set("Connection", "close")
			refuse(w, r)
			return
		}
		connlimit.MarkAuthenticated(r.Context())
		data, hold, ok := a.readBody(w, r, maxBody)
		if !ok {
			return
		}
		if hold != nil {
			defer hold.Release()
			r.Body, r.ContentLength = memBody(data), int64(len(data))
		}
		h(w, r)
	})
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

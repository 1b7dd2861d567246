// Package console is the operator console: read-only HTML pages that the
// daemon serves at /console/ on its HTTP listener, behind the same bearer
// token and browser checks as every other route: a page is served only to a
// request whose Host the listener answers for (internal/httpapi, guard.go),
// so a page that rebinds its own name to the daemon reads nothing. Pages are rendered on the server with
// html/template; there is no script and no form, and only GET routes exist.
// Evidence is shown as the store holds it: matched records already
// redacted, so a redacted field shows only its marker.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
)

// PageSize bounds the sessions, runs and tasks a page lists.
const PageSize = 100

// Pending is the outcome shown for a session begun and not yet verified.
const Pending = "PENDING"

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"record": recordText,
	"query":  query,
	"outcome": func(o string) string {
		if o == "" {
			return Pending
		}
		return o
	},
}).ParseFS(templateFS, "templates/*.html"))

// Console serves the pages from the session store through the manager,
// and the runs pages through the runs service.
type Console struct {
	Manager *session.Manager
	Store   store.Backend
	// Runs is the runs service (internal/runs); nil: one over Manager
	// (runs.For; every one over a Manager is equivalent).
	Runs *runs.Service
}

// runService is c.Runs, or one over c.Manager.
func (c *Console) runService() *runs.Service {
	if c.Runs != nil {
		return c.Runs
	}
	return runs.For(c.Manager)
}

// Register joins the console's GET routes to api (behind its token).
func (c *Console) Register(api *httpapi.API) {
	api.Handle("GET /console/{$}", c.sessions)
	api.Handle("GET /console/sessions/{id}", c.session)
	api.Handle("GET /console/reconciliation", c.reconciliation)
	api.Handle("GET /console/runs", c.runs)
	api.Handle("GET /console/runs/{id}", c.run)
}

// Runs lists the newest runs, at most limit, each as GetRun reports it
// (runs.Service.ListRuns): its outcome (or open), its steps with their
// latest session and outcome, its artifacts. The store is read whole, as
// Recent reads it.
func Runs(ctx context.Context, svc *runs.Service, limit int) ([]*runs.RunView, int, error) {
	list, err := svc.ListRuns(ctx)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(list, func(a, b *runs.RunView) int {
		if c := b.BegunAt.Compare(a.BegunAt); c != 0 {
			return c
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	total := len(list)
	if len(list) > limit {
		list = list[:limit]
	}
	return list, total, nil
}

func (c *Console) runs(w http.ResponseWriter, r *http.Request) {
	list, total, err := Runs(r.Context(), c.runService(), PageSize)
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "reading the store failed")
		return
	}
	render(w, "runs.html", map[string]any{"Title": "Runs", "Runs": list, "Total": total, "PageSize": PageSize})
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v, err := c.runService().GetRun(r.Context(), id)
	if err != nil {
		if se, ok := errors.AsType[*session.Error](err); ok && (se.Kind == session.NotFound || se.Kind == session.Invalid) {
			httpapi.WriteError(w, http.StatusNotFound, "not_found", "no such run")
			return
		}
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "reading the run failed")
		return
	}
	render(w, "run.html", map[string]any{"Title": "Run " + id, "Run": v})
}

// Row is one session in the list.
type Row struct {
	ID         string
	Deployment string
	Outcome    string
	Tiers      []int
	Kinds      []string
	BegunAt    time.Time
	VerifiedAt time.Time
	Tasks      int
	// Damaged: the session's stored record or result fails its integrity
	// check; the row shows only its id (Outcome is Damaged).
	Damaged bool
}

// Damaged is the outcome the list shows for a session whose stored values
// fail their integrity check (`verifierd store check` names them).
const Damaged = "DAMAGED"

// storedMeta is the part of a stored session the list shows.
type storedMeta struct {
	DeploymentName string    `json:"deployment_name"`
	BegunAt        time.Time `json:"begun_at"`
	Begin          struct {
		Effects []struct {
			Tier      int    `json:"tier"`
			Candidate string `json:"candidate"`
		} `json:"effects"`
	} `json:"begin"`
}

// Filter selects sessions by outcome, deployment name and tier (empty or
// zero: any).
type Filter struct {
	Outcome    string
	Deployment string
	Tier       int
}

func (f Filter) match(r *Row) bool {
	return (f.Outcome == "" || f.Outcome == r.Outcome) &&
		(f.Deployment == "" || f.Deployment == r.Deployment) &&
		(f.Tier == 0 || slices.Contains(r.Tiers, f.Tier))
}

// Recent lists the newest sessions matching f, at most limit. The store is
// read whole (session ids are random, not in time order); each session
// keeps only a small row.
func Recent(ctx context.Context, st store.Backend, f Filter, limit int) ([]Row, int, error) {
	var rows []Row
	err := st.ForEachSession(ctx, func(id string, meta, result []byte) error {
		var m storedMeta
		r := Row{ID: id, Outcome: Damaged, Damaged: true}
		// A session whose values fail their integrity check (meta nil) or
		// do not decode is a damaged row: it never hides the others.
		if meta != nil && json.Unmarshal(meta, &m) == nil {
			r = newRow(id, &m, result)
		}
		if f.match(&r) {
			rows = append(rows, r)
		}
		return nil
	})
	// Damaged rows first (they need the operator), then newest first.
	slices.SortFunc(rows, func(a, b Row) int {
		if a.Damaged != b.Damaged {
			if a.Damaged {
				return -1
			}
			return 1
		}
		if c := b.BegunAt.Compare(a.BegunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	total := len(rows)
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, total, err
}

func newRow(id string, m *storedMeta, result []byte) Row {
	r := Row{ID: id, Deployment: m.DeploymentName, BegunAt: m.BegunAt, Outcome: Pending}
	for _, e := range m.Begin.Effects {
		if !slices.Contains(r.Tiers, e.Tier) {
			r.Tiers = append(r.Tiers, e.Tier)
		}
		if !slices.Contains(r.Kinds, e.Candidate) {
			r.Kinds = append(r.Kinds, e.Candidate)
		}
	}
	var res session.Result
	if result != nil && json.Unmarshal(result, &res) == nil {
		r.Outcome, r.VerifiedAt = string(res.Outcome), res.VerifiedAt
		for _, e := range res.Effects {
			if e.ReconciliationTask != nil {
				r.Tasks++
			}
		}
	}
	return r
}

func (c *Console) sessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := Filter{Outcome: q.Get("outcome"), Deployment: q.Get("deployment")}
	if t := q.Get("tier"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > 4 {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "tier: a tier is 1 to 4")
			return
		}
		f.Tier = n
	}
	rows, total, err := Recent(r.Context(), c.Store, f, PageSize)
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "reading the store failed")
		return
	}
	render(w, "sessions.html", map[string]any{"Title": "Sessions", "Rows": rows, "Total": total, "Filter": f, "PageSize": PageSize})
}

// Effect is one effect on the session page.
type Effect struct {
	Index int
	session.EffectResult
}

// Attempt is one result of a session: the first Verify, or a
// re-verification.
type Attempt struct {
	Label   string
	Result  *session.Result
	Effects []Effect
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := c.Manager.Get(r.Context(), id)
	if err != nil {
		if se, ok := errors.AsType[*session.Error](err); ok && (se.Kind == session.NotFound || se.Kind == session.Invalid) {
			httpapi.WriteError(w, http.StatusNotFound, "not_found", "no such session")
			return
		}
		if _, damaged := errors.AsType[*store.IntegrityError](err); damaged {
			render(w, "session.html", map[string]any{"Title": "Session " + id, "Damaged": err.Error()})
			return
		}
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "reading the session failed")
		return
	}
	var deployment string
	if meta, _, err := c.Store.Session(r.Context(), id); err == nil {
		var m storedMeta
		if json.Unmarshal(meta, &m) == nil {
			deployment = m.DeploymentName
		}
	}
	var attempts []Attempt
	add := func(label string, res *session.Result) {
		a := Attempt{Label: label, Result: res}
		for i, e := range res.Effects {
			a.Effects = append(a.Effects, Effect{Index: i, EffectResult: e})
		}
		attempts = append(attempts, a)
	}
	if st.Result != nil {
		add("Verify", st.Result)
	}
	for _, rv := range st.Reverifications {
		add("Re-verification "+strconv.Itoa(rv.Attempt)+": "+rv.ReverifyReason, rv)
	}
	render(w, "session.html", map[string]any{"Title": "Session " + id, "State": st, "Deployment": deployment, "Attempts": attempts})
}

// Task is one open reconciliation task in the queue.
type Task struct {
	SessionID  string
	Deployment string
	VerifiedAt time.Time
	Effect     int
	Task       *judge.Task
	// Damaged: the session's stored values fail their integrity check, so
	// its tasks cannot be read (Task is nil); the queue lists it so that
	// it is not lost.
	Damaged bool
}

// OpenTasks lists the open reconciliation tasks, newest first, at most
// limit: those of sessions whose latest result (the first Verify, or the
// last re-verification) carries tasks and is not VERIFIED.
func OpenTasks(ctx context.Context, m *session.Manager, st store.Backend, limit int) ([]Task, error) {
	rows, _, err := Recent(ctx, st, Filter{}, int(^uint(0)>>1))
	if err != nil {
		return nil, err
	}
	var out []Task
	for _, r := range rows {
		if len(out) >= limit {
			break
		}
		if r.Damaged {
			out = append(out, Task{SessionID: r.ID, Damaged: true})
			continue
		}
		if r.Tasks == 0 {
			continue
		}
		s, err := m.Get(ctx, r.ID)
		if _, damaged := errors.AsType[*store.IntegrityError](err); damaged {
			out = append(out, Task{SessionID: r.ID, Deployment: r.Deployment, Damaged: true})
			continue
		}
		if err != nil {
			return nil, err
		}
		latest := s.Result
		if n := len(s.Reverifications); n > 0 {
			latest = s.Reverifications[n-1]
		}
		if latest == nil || latest.Outcome == judge.Verified {
			continue
		}
		for i, e := range latest.Effects {
			if e.ReconciliationTask != nil && len(out) < limit {
				out = append(out, Task{SessionID: r.ID, Deployment: r.Deployment, VerifiedAt: latest.VerifiedAt, Effect: i, Task: e.ReconciliationTask})
			}
		}
	}
	return out, nil
}

func (c *Console) reconciliation(w http.ResponseWriter, r *http.Request) {
	tasks, err := OpenTasks(r.Context(), c.Manager, c.Store, PageSize)
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "reading the store failed")
		return
	}
	render(w, "reconciliation.html", map[string]any{"Title": "Reconciliation queue", "Tasks": tasks, "PageSize": PageSize})
}

func render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, "internal", "rendering the page failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// No script, no form target, no framing: the pages only show.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

// recordText shows a matched record as field: value lines, in field order.
func recordText(r judge.Record) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v, err := json.Marshal(r[k])
		if err != nil {
			v = []byte("?")
		}
		b.WriteString(k + ": " + string(v))
	}
	return b.String()
}

// query builds the list page's link for a filter.
func query(outcome, deployment string, tier int) string {
	v := url.Values{}
	if outcome != "" {
		v.Set("outcome", outcome)
	}
	if deployment != "" {
		v.Set("deployment", deployment)
	}
	if tier != 0 {
		v.Set("tier", strconv.Itoa(tier))
	}
	return "/console/?" + v.Encode()
}

// Package recordapp is a small server-rendered record application, written
// for the ui_readback tests: the kind of legacy GUI the adapter exists for.
// It has a sign-in form with cookie sessions, one encounters page per patient
// (an HTML table rendered on the server with html/template), and a JSON API
// that only tests use, to write as the automation would and to inject the
// display faults a record page can show (a slow replica, shortened text, a
// redesign, a page that posts as it loads, another record's header). It
// logs every request with the session cookie it carried, so a test can prove
// which session read what.
package recordapp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/webapp"
)

// The two accounts: the read-back's and the one the automation acts with.
const (
	ReaderUser     = "records-reader"
	ReaderPassword = "reader-pass-7c1"
	ClerkUser      = "clerk"
	ClerkPassword  = "clerk-pass-4e9"
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "sid"

// ShortNoteLength is how many characters of a note a shortening fault shows.
const ShortNoteLength = 10

// Encounter is one row of a patient's encounters page. Date is ISO
// (2006-01-02); the page shows it as 02/01/2006 and the type in capitals.
type Encounter struct {
	ID        int    `json:"id"`
	PatientID string `json:"patient_id"`
	Type      string `json:"type"`
	Note      string `json:"note"`
	Date      string `json:"date"`
	Author    string `json:"author,omitempty"`
	// Amended is a second note the page shows beside Note, in a cell of
	// the same class (td.note): a row that shows one field twice.
	Amended string `json:"amended,omitempty"`
}

// Faults change how the record pages display correct data.
type Faults struct {
	// ReplicaDelayMS delays every record page, as a lagging read replica.
	ReplicaDelayMS int `json:"replica_delay_ms,omitempty"`
	// ShortenNotes shows only the first ShortNoteLength characters of each
	// note: "marker" appends "…", "cut" appends nothing. The title attribute
	// keeps the whole note.
	ShortenNotes string `json:"shorten_notes,omitempty"`
	// Redesign renders the encounters as cards with other class names.
	Redesign bool `json:"redesign,omitempty"`
	// PostOnLoad makes the record page POST to PostTo (default
	// /api/viewed) with fetch as it loads.
	PostOnLoad bool   `json:"post_on_load,omitempty"`
	PostTo     string `json:"post_to,omitempty"`
	// ReloadOnFailure makes the page load itself again when the POST it
	// makes as it loads fails, as an app that signs in again does: with
	// the POST refused, the page reloads over and over.
	ReloadOnFailure bool `json:"reload_on_failure,omitempty"`
	// PostEveryMS makes the record page POST to PostTo again every so
	// many milliseconds for as long as it is open.
	PostEveryMS int `json:"post_every_ms,omitempty"`
	// PostFromWorker makes the record page start a dedicated worker that
	// POSTs to PostTo, a request no page script makes; the page becomes
	// ready (#encounters appears) only once that POST has settled.
	PostFromWorker bool `json:"post_from_worker,omitempty"`
	// ShowPatient makes every record page's header show this identifier
	// (a page of another record).
	ShowPatient string `json:"show_patient,omitempty"`
	// HideIdentity drops the identifier from the header.
	HideIdentity bool `json:"hide_identity,omitempty"`
	// Down answers every request with 503.
	Down bool `json:"down,omitempty"`
	// SignInAction makes the sign-in form POST to this path (also a
	// sign-in) instead of /login, as an application whose form posts to
	// another URL than the page it is on.
	SignInAction string `json:"sign_in_action,omitempty"`
	// RejectReader rejects every sign-in of the read-back account, as
	// after its password was changed or the account was locked.
	RejectReader bool `json:"reject_reader,omitempty"`
	// RenderDelayMS makes the record page render its list (the rows, or
	// the empty-state element) by script, so many milliseconds after the
	// page loaded, as an application that fills its list after the page
	// appears: the list's container (#encounters) is there at once.
	RenderDelayMS int `json:"render_delay_ms,omitempty"`
	// NeverRender makes the record page show the list's container and
	// never its rows nor its empty state, as when the script that fills
	// the list failed.
	NeverRender bool `json:"never_render,omitempty"`
}

// Request is one logged request.
type Request struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// SessionID is the session cookie's value ("" when none) and
	// SessionUser the user it belongs to ("" when none or unknown).
	SessionID   string   `json:"session_id,omitempty"`
	SessionUser string   `json:"session_user,omitempty"`
	Cookies     []string `json:"cookies,omitempty"`
}

// App is the record application. Its zero value is not usable; call New.
type App struct {
	mu         sync.Mutex
	users      map[string]string
	sessions   map[string]string
	patients   map[string]bool
	encounters []Encounter // ordered by ID
	nextID     int
	faults     testservers.Setting[Faults]
	log        []Request
	views      int // record pages served, the value of the last_viewed cookie
}

// New returns an application with the two accounts and no patients.
func New() *App {
	return &App{
		users:    map[string]string{ReaderUser: ReaderPassword, ClerkUser: ClerkPassword},
		sessions: map[string]string{},
		patients: map[string]bool{},
		nextID:   1,
	}
}

// AddPatient makes a patient's encounters page exist.
func (a *App) AddPatient(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.patients[id] = true
}

// Add stores an encounter (its ID is assigned) and returns the ID. The
// patient is created when missing.
func (a *App) Add(e Encounter) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addLocked(e)
}

func (a *App) addLocked(e Encounter) int {
	e.ID = a.nextID
	a.nextID++
	a.patients[e.PatientID] = true
	a.encounters = append(a.encounters, e)
	return e.ID
}

// Update replaces the encounter with e's ID in place.
func (a *App) Update(e Encounter) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.encounters {
		if a.encounters[i].ID == e.ID {
			a.patients[e.PatientID] = true
			a.encounters[i] = e
			return nil
		}
	}
	return fmt.Errorf("no encounter %d", e.ID)
}

// Delete removes an encounter.
func (a *App) Delete(id int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.encounters {
		if a.encounters[i].ID == id {
			a.encounters = append(a.encounters[:i], a.encounters[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("no encounter %d", id)
}

// Reset deletes every encounter of a patient (the patient stays).
func (a *App) Reset(patient string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.patients[patient] = true
	kept := a.encounters[:0]
	for _, e := range a.encounters {
		if e.PatientID != patient {
			kept = append(kept, e)
		}
	}
	a.encounters = kept
}

// Seed adds n encounters for a patient in one step.
func (a *App) Seed(patient string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range n {
		a.addLocked(Encounter{PatientID: patient, Type: "Vitals", Note: "seeded " + strconv.Itoa(i), Date: "2026-01-02", Author: ClerkUser})
	}
}

// Encounters returns a patient's encounters.
func (a *App) Encounters(patient string) []Encounter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.forPatientLocked(patient)
}

func (a *App) forPatientLocked(patient string) []Encounter {
	var out []Encounter
	for _, e := range a.encounters {
		if e.PatientID == patient {
			out = append(out, e)
		}
	}
	return out
}

// SetFaults replaces the display faults.
func (a *App) SetFaults(f Faults) { a.faults.Set(f) }

// Requests returns the request log.
func (a *App) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.log...)
}

// ClearRequests empties the request log.
func (a *App) ClearRequests() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.log = nil
}

// SignIn opens a session for a user, as the sign-in form does, and returns
// the session cookie's value.
func (a *App) SignIn(user, password string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.signInLocked(user, password)
}

func (a *App) signInLocked(user, password string) (string, error) {
	if want, ok := a.users[user]; !ok || want != password || (user == ReaderUser && a.faults.Get().RejectReader) {
		return "", errors.New("wrong user name or password")
	}
	b := make([]byte, 16)
	rand.Read(b)
	sid := hex.EncodeToString(b)
	a.sessions[sid] = user
	return sid, nil
}

// Handler serves the application.
func (a *App) Handler() http.Handler {
	routes := webapp.Routes{
		"GET /login":                         a.loginPage,
		"POST /login":                        a.login,
		"POST /session":                      a.login,
		"GET /{$}":                           a.home,
		"GET /patients/{patient}/encounters": a.encountersPage,
		"GET /api/beacon":                    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"POST /api/viewed":                   func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"POST /api/patients":                 a.apiAddPatient,
		"POST /api/encounters":               a.apiAdd,
		"PUT /api/encounters/{id}":           a.apiUpdate,
		"DELETE /api/encounters/{id}":        a.apiDelete,
		"POST /api/faults":                   a.apiFaults,
		"GET /api/requests":                  a.apiRequests,
	}
	mux := routes.Mux()
	gated := webapp.Gate(func() bool { return a.faults.Get().Down }, "the record application is down for maintenance",
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			mux.ServeHTTP(w, r)
		}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.logRequest(r)
		gated.ServeHTTP(w, r)
	})
}

// logRequest adds a request to the log, with the session its cookie names.
func (a *App) logRequest(r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
	for _, c := range r.Cookies() {
		req.Cookies = append(req.Cookies, c.Name+"="+c.Value)
		if c.Name == SessionCookie {
			req.SessionID = c.Value
			req.SessionUser = a.sessions[c.Value]
		}
	}
	a.log = append(a.log, req)
}

// user returns the signed-in user of a request, or "".
func (a *App) user(r *http.Request) string {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[c.Value]
}

var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"upper": strings.ToUpper,
	"displayDate": func(iso string) string {
		t, err := time.Parse("2006-01-02", iso)
		if err != nil {
			return iso
		}
		return t.Format("02/01/2006")
	},
}).Parse(`
{{define "login"}}<!doctype html>
<html><head><title>Sign in</title></head><body>
<h1>Clinic records</h1>
{{if .Error}}<p id="login-error">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
  <label>User <input id="username" name="username" autocomplete="username"></label>
  <label>Password <input id="password" name="password" type="password"></label>
  <button type="submit">Sign in</button>
</form>
</body></html>{{end}}

{{define "home"}}<!doctype html>
<html><head><title>Clinic records</title></head><body>
<nav><span id="user-menu">{{.}}</span></nav>
<p>Open a patient's encounters from the patient list.</p>
</body></html>{{end}}

{{define "notfound"}}<!doctype html>
<html><head><title>Not found</title></head><body>
<nav><span id="user-menu">{{.User}}</span></nav>
<p id="not-found">No patient {{.Patient}}.</p>
</body></html>{{end}}

{{define "encounters"}}<!doctype html>
<html><head><title>Encounters</title></head><body>
<nav><span id="user-menu">{{.User}}</span></nav>
<h1>Patient {{if not .HideIdentity}}<span id="patient-mrn">
    {{.Shown}}
  </span>{{end}}</h1>
{{if .Redesign}}<div id="encounters" class="v2">
{{range .Rows}}  <article class="enc" data-key="{{.ID}}"><h3>{{.Type}}</h3><p>{{.Note}}</p><time>{{.Date}}</time></article>
{{else}}  <p class="empty-state">Nothing recorded yet.</p>
{{end}}</div>
{{else}}<section id="{{if .PostFromWorker}}encounters-pending{{else}}encounters{{end}}">
{{if .Deferred}}<template id="deferred-list">{{end}}{{if .Rows}}<table>
  <thead><tr><th>Type</th><th>Date</th><th>Note</th></tr></thead>
  <tbody>
{{range .Rows}}    <tr class="encounter" data-id="{{.ID}}">
      <td class="type">{{upper .Type}}</td>
      <td class="date">{{displayDate .Date}}</td>
      <td class="note" title="{{.Note}}">
        {{.Shown}}
      </td>{{if .Amended}}
      <td class="note">{{.Amended}}</td>{{end}}
    </tr>
{{end}}  </tbody>
</table>
{{else}}<p id="no-encounters">No encounters recorded.</p>
{{end}}{{if .Deferred}}</template>{{end}}</section>
{{end}}<script>
  var views = +(localStorage.getItem("views") || 0);
  localStorage.setItem("views", String(views + 1));
  document.querySelectorAll("tr.encounter").forEach(function (tr) { tr.setAttribute("data-views", String(views)); });
  fetch("/api/beacon?views=" + views);
{{if .RenderDelayMS}}  setTimeout(function () { var t = document.getElementById("deferred-list"); t.replaceWith(t.content); }, {{.RenderDelayMS}});
{{end}}{{if .PostOnLoad}}  fetch({{.PostTo}}, {method: "POST", body: JSON.stringify({patient: {{.Patient}}})}){{if .ReloadOnFailure}}.catch(function () { setTimeout(function () { location.reload(); }, 20); }){{end}};
{{end}}{{if .PostFromWorker}}  (function () {
    var code = "fetch(" + JSON.stringify(new URL({{.PostTo}}, location.href).href) + ", {method: 'POST', body: 'worker'})" +
      ".then(function () { postMessage('sent'); }, function () { postMessage('failed'); });";
    var w = new Worker(URL.createObjectURL(new Blob([code], {type: "text/javascript"})));
    w.onmessage = function () { document.getElementById("encounters-pending").id = "encounters"; };
  })();
{{end}}{{if .PostEveryMS}}  setInterval(function () { fetch({{.PostTo}}, {method: "POST", body: "again"}).catch(function () {}); }, {{.PostEveryMS}});
{{end}}</script>
</body></html>{{end}}
`))

type row struct {
	Encounter
	Shown string
}

// loginForm is what the sign-in page shows.
type loginForm struct{ Error, Action string }

func (a *App) loginPage(w http.ResponseWriter, r *http.Request) {
	pages.ExecuteTemplate(w, "login", loginForm{Action: a.signInAction()})
}

// signInAction is the path the sign-in form posts to.
func (a *App) signInAction() string {
	if p := a.faults.Get().SignInAction; p != "" {
		return p
	}
	return "/login"
}

func (a *App) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sid, err := a.SignIn(r.PostForm.Get("username"), r.PostForm.Get("password"))
	if err != nil {
		w.WriteHeader(http.StatusOK)
		pages.ExecuteTemplate(w, "login", loginForm{Error: err.Error(), Action: a.signInAction()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *App) home(w http.ResponseWriter, r *http.Request) {
	u := a.user(r)
	if u == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	pages.ExecuteTemplate(w, "home", u)
}

func (a *App) encountersPage(w http.ResponseWriter, r *http.Request) {
	u := a.user(r)
	if u == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	patient := r.PathValue("patient")
	f := a.faults.Get()
	if f.ReplicaDelayMS > 0 && !testservers.Hold(r.Context(), time.Duration(f.ReplicaDelayMS)*time.Millisecond) {
		return
	}
	a.mu.Lock()
	known := a.patients[patient]
	encs := a.forPatientLocked(patient)
	a.mu.Unlock()
	if !known {
		w.WriteHeader(http.StatusNotFound)
		pages.ExecuteTemplate(w, "notfound", struct{ User, Patient string }{u, patient})
		return
	}
	rows := make([]row, len(encs))
	for i, e := range encs {
		rows[i] = row{Encounter: e, Shown: e.Note}
		if f.ShortenNotes != "" && len([]rune(e.Note)) > ShortNoteLength {
			rows[i].Shown = string([]rune(e.Note)[:ShortNoteLength])
			if f.ShortenNotes == "marker" {
				rows[i].Shown += "…"
			}
		}
	}
	shown := patient
	if f.ShowPatient != "" {
		shown = f.ShowPatient
	}
	a.mu.Lock()
	a.views++
	view := a.views
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "last_viewed", Value: strconv.Itoa(view), Path: "/"})
	postTo := f.PostTo
	if postTo == "" {
		postTo = "/api/viewed"
	}
	renderDelay := f.RenderDelayMS
	if f.NeverRender {
		renderDelay = 0
	}
	pages.ExecuteTemplate(w, "encounters", struct {
		User, Patient, Shown, PostTo       string
		Rows                               []row
		Redesign, PostOnLoad, HideIdentity bool
		PostEveryMS                        int
		PostFromWorker, ReloadOnFailure    bool
		Deferred                           bool
		RenderDelayMS                      int
	}{u, patient, shown, postTo, rows, f.Redesign, f.PostOnLoad, f.HideIdentity, f.PostEveryMS, f.PostFromWorker, f.ReloadOnFailure,
		f.NeverRender || f.RenderDelayMS > 0, renderDelay})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// actor is the API's session check: writes need a signed-in session, as
// the acting screen has.
func (a *App) actor(w http.ResponseWriter, r *http.Request) (string, bool) {
	u := a.user(r)
	if u == "" {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return "", false
	}
	return u, true
}

func (a *App) apiAddPatient(w http.ResponseWriter, r *http.Request) {
	var p struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.ID == "" {
		http.Error(w, "send {\"id\": \"...\"}", http.StatusBadRequest)
		return
	}
	a.AddPatient(p.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (a *App) apiAdd(w http.ResponseWriter, r *http.Request) {
	u, ok := a.actor(w, r)
	if !ok {
		return
	}
	var e Encounter
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil || e.PatientID == "" {
		http.Error(w, "send an encounter with a patient_id", http.StatusBadRequest)
		return
	}
	e.Author = u
	writeJSON(w, map[string]int{"id": a.Add(e)})
}

func (a *App) apiUpdate(w http.ResponseWriter, r *http.Request) {
	u, ok := a.actor(w, r)
	if !ok {
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	var e Encounter
	if err == nil {
		err = json.NewDecoder(r.Body).Decode(&e)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.ID, e.Author = id, u
	if err := a.Update(e); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *App) apiDelete(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.actor(w, r); !ok {
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err == nil {
		err = a.Delete(id)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *App) apiFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.SetFaults(f)
	w.WriteHeader(http.StatusNoContent)
}

func (a *App) apiRequests(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, a.Requests())
}

// Server is the application listening on loopback.
type Server struct {
	App *App
	*webapp.Server
}

// Start serves a new App on 127.0.0.1 (addr "" picks a free port).
func Start(addr string) (*Server, error) {
	app := New()
	srv, err := webapp.Listen(addr, app.Handler())
	if err != nil {
		return nil, err
	}
	return &Server{App: app, Server: srv}, nil
}

// SessionIDs returns the distinct session cookie values logged for user,
// sorted.
func SessionIDs(log []Request, user string) []string {
	seen := map[string]bool{}
	for _, r := range log {
		if r.SessionUser == user && r.SessionID != "" {
			seen[r.SessionID] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

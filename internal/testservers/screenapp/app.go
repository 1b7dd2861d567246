// Package screenapp is a small GUI-only application for the onscreen
// adapter's tests: a form that saves a record and paints a confirmation
// screen, and a record page per reference. It has no API a verifier could
// read, only its screens. Its save can be switched to the faults an
// on-screen read-back exists to catch: an optimistic save that paints
// success without persisting anything, and a save that stores (and shows)
// another value than the one typed.
package screenapp

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/webapp"
)

// Save modes.
const (
	Honest     = "honest"     // stores what was typed and shows what it stored
	Optimistic = "optimistic" // paints the typed values as saved; stores nothing
	WrongValue = "wrong"      // stores and shows another name than the one typed
	Duplicate  = "duplicate"  // stores the record twice (a double submit) and shows what it stored
)

// DuplicateSuffix ends the reference of the second record a Duplicate save
// stores.
const DuplicateSuffix = "-dup"

// Token refresh modes of the record page (SetTokenRefresh).
const (
	TokenOff       = 0 // the record page posts nothing
	TokenOnLoad    = 1 // it POSTs to TokenPath as it loads and shows the record once that succeeds
	TokenAndNotice = 2 // as TokenOnLoad, and POSTs to NoticePath (a write) before it shows the record
	TokenWithQuery = 3 // as TokenOnLoad, but the POST carries TokenQuery (data in the query string)
)

// TokenQuery is the query string a TokenWithQuery page sends with its POST
// to TokenPath.
const TokenQuery = "as=someone-else"

// TokenPath is where a record page renews its session token as it loads;
// NoticePath is where it reports that the record was seen (a write).
const (
	TokenPath  = "/auth/token"
	NoticePath = "/api/seen"
)

// WrongName is the name a WrongValue save stores instead of the typed one.
const WrongName = "Zebulon Quartermaine"

// Record is one saved record. Font is the CSS font family its page shows it
// in (sans, serif or mono), so that the OCR is measured on several.
type Record struct {
	Ref    string `json:"ref"`
	Name   string `json:"name"`
	Born   string `json:"born"`
	Amount string `json:"amount"`
	Font   string `json:"font,omitempty"`
}

// Fields are where each value is painted, in CSS pixels of the viewport:
// x, y, width, height. The record page and the confirmation screen use the
// same places.
var Fields = map[string][4]int{
	"name":   {40, 120, 560, 44},
	"born":   {40, 190, 560, 44},
	"amount": {40, 260, 560, 44},
}

// App is the application's state.
type App struct {
	mode testservers.Setting[string]
	down testservers.Setting[bool]
	// refreshMS > 0 makes every record page behave as a single-page
	// admin app that renews its session (SetRefreshing).
	refreshMS testservers.Setting[int]
	// token is the record page's token refresh (SetTokenRefresh).
	token testservers.Setting[int]
	// listDelay is the list page's rendering delay (SetListDelay).
	listDelay testservers.Setting[int]

	mu      sync.Mutex
	records map[string]Record
	posts   int
	tokens  int
}

// Server is a running App on loopback.
type Server struct {
	*App
	*webapp.Server
}

// Start serves a new App on a free loopback port.
func Start() (*Server, error) {
	a := &App{records: map[string]Record{}}
	a.mode.Set(Honest)
	srv, err := webapp.Listen("", webapp.Gate(a.down.Get, "down for maintenance", a.routes().Mux()))
	if err != nil {
		return nil, err
	}
	return &Server{App: a, Server: srv}, nil
}

// SetMode switches how the next saves behave.
func (a *App) SetMode(m string) { a.mode.Set(m) }

// RefreshPath is where a refreshing record page POSTs (SetRefreshing).
const RefreshPath = "/auth/refresh"

// SetRefreshing makes every record page (everyMS > 0) behave as a
// single-page admin app that renews its session token: it POSTs to
// RefreshPath with fetch as it loads, again every everyMS milliseconds for
// as long as it is open, and from a dedicated worker (a request no page
// script makes); the record (#record) appears only once the worker's POST
// has settled. When the renewal made as it loads fails, the page loads
// itself again (an app that signs in again), which renews again. Posts
// counts every such POST that arrives. 0 switches it off.
func (a *App) SetRefreshing(everyMS int) { a.refreshMS.Set(everyMS) }

// SetTokenRefresh makes every record page renew its session token with a
// POST to TokenPath as it loads (TokenOnLoad), as many single-page apps do,
// and show the record (#record) only once the renewal succeeded; when it
// fails the page shows #signed-out instead. TokenAndNotice also POSTs to
// NoticePath before it shows the record. TokenOff switches it off.
func (a *App) SetTokenRefresh(mode int) { a.token.Set(mode) }

// Tokens counts the POSTs to TokenPath that arrived (Posts does not count
// them).
func (a *App) Tokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokens
}

// ListNeverRenders, given to SetListDelay, makes the list page never
// render its rows nor #empty.
const ListNeverRenders = -1

// SetListDelay makes the list page (/list) render its rows and its empty
// state (#empty) by script, ms milliseconds after it loaded, as an
// application that fills its list after the page appears; the table
// (#records) is there at once, and body gets the attribute data-loaded
// once the list is rendered. ListNeverRenders never renders them (the
// script that fills the list failed); 0 renders them with the page.
func (a *App) SetListDelay(ms int) { a.listDelay.Set(ms) }

// SetDown makes every page answer 503 (true), as an outage, or serves
// again (false).
func (a *App) SetDown(down bool) { a.down.Set(down) }

// Put stores a record directly, as if saved earlier.
func (a *App) Put(r Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.records[r.Ref] = r
}

// Delete removes a stored record.
func (a *App) Delete(ref string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.records, ref)
}

// Get returns a stored record.
func (a *App) Get(ref string) (Record, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.records[ref]
	return r, ok
}

// Posts counts the POST requests the application received.
func (a *App) Posts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.posts
}

func (a *App) routes() webapp.Routes {
	return webapp.Routes{
		"GET /new":           a.form,
		"GET /show":          a.show,
		"GET /records/{ref}": a.recordPage,
		"GET /search":        a.search,
		"GET /list":          a.list,
		"GET /edit/{ref}":    a.edit,
		"POST " + TokenPath: func(w http.ResponseWriter, r *http.Request) {
			a.mu.Lock()
			a.tokens++
			a.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"token": "renewed"}`)
		},
		"GET /postform": func(w http.ResponseWriter, r *http.Request) {
			// A page whose button submits a form with POST, and which posts
			// with fetch when asked: what a read-back must never send.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><body><form method="post" action="/submit"><input name="x" value="1"><button id="send" type="submit">Send</button></form>
<button id="fetch" type="button" onclick="fetch('/submit', {method: 'POST', body: 'x=1'})">Fetch</button></body></html>`)
		},
		"POST /api/records": a.save,
		"POST /": func(w http.ResponseWriter, r *http.Request) {
			a.mu.Lock()
			a.posts++
			a.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		},
	}
}

func (a *App) save(w http.ResponseWriter, r *http.Request) {
	var rec Record
	if err := json.NewDecoder(r.Body).Decode(&rec); err != nil || rec.Ref == "" {
		http.Error(w, "bad record", http.StatusBadRequest)
		return
	}
	mode := a.mode.Get()
	a.mu.Lock()
	a.posts++
	if mode == WrongValue {
		rec.Name = WrongName
	}
	a.records[rec.Ref] = rec
	if mode == Duplicate {
		dup := rec
		dup.Ref += DuplicateSuffix
		a.records[dup.Ref] = dup
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rec)
}

var fonts = map[string]string{
	"sans":  `"DejaVu Sans", sans-serif`,
	"serif": `"DejaVu Serif", serif`,
	"mono":  `"DejaVu Sans Mono", monospace`,
}

func fontFamily(name string) template.CSS {
	if f, ok := fonts[name]; ok {
		return template.CSS(f)
	}
	return template.CSS(fonts["sans"])
}

type view struct {
	Title     string
	Font      template.CSS
	Rec       *Record
	Form      bool
	Mode      string
	Fields    map[string][4]int
	Absent    bool
	RefreshMS int
	Refresh   string
	Token     int
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
 html, body { margin: 0; padding: 0; background: #fff; color: #111; }
 .v { position: absolute; font: 24px {{.Font}}; line-height: 44px; white-space: nowrap; overflow: hidden; }
 #head { position: absolute; left: 40px; top: 30px; font: bold 28px sans-serif; }
 form { position: absolute; left: 40px; top: 360px; }
</style></head>
<body>
<div id="head">{{.Title}}</div>
{{if .Absent}}<div id="not-found" class="v" style="left:40px;top:120px;width:560px;height:44px">No such record</div>{{end}}
{{with .Rec}}<div id="{{if or $.RefreshMS $.Token}}record-pending{{else}}record{{end}}" data-ref="{{.Ref}}">
 <div id="name" class="v" style="left:{{index $.Fields.name 0}}px;top:{{index $.Fields.name 1}}px;width:{{index $.Fields.name 2}}px;height:{{index $.Fields.name 3}}px">{{.Name}}</div>
 <div id="born" class="v" style="left:{{index $.Fields.born 0}}px;top:{{index $.Fields.born 1}}px;width:{{index $.Fields.born 2}}px;height:{{index $.Fields.born 3}}px">{{.Born}}</div>
 <div id="amount" class="v" style="left:{{index $.Fields.amount 0}}px;top:{{index $.Fields.amount 1}}px;width:{{index $.Fields.amount 2}}px;height:{{index $.Fields.amount 3}}px">{{.Amount}}</div>
</div>{{end}}
{{if .Token}}<script>
(function () {
  var notice = {{.Token}} === 2;
  function show() {
    var r = document.getElementById("record-pending");
    if (r) { r.id = "record"; }
  }
  fetch({{.Token}} === 3 ? "/auth/token?as=someone-else" : "/auth/token", {method: "POST", body: "renew"}).then(function (resp) {
    if (!resp.ok) { throw new Error("refused"); }
    if (notice) {
      return fetch("/api/seen", {method: "POST", body: "seen"}).then(show, show);
    }
    show();
  }).catch(function () {
    var d = document.createElement("div");
    d.id = "signed-out";
    d.textContent = "Signed out";
    document.body.appendChild(d);
  });
})();
</script>{{end}}
{{if .RefreshMS}}<script>
(function () {
  var url = new URL({{.Refresh}}, location.href).href;
  function renew() { return fetch(url, {method: "POST", body: "renew"}); }
  // A renewal refused as the page loads signs the app in again: it loads
  // itself once more, and so renews again.
  renew().catch(function () { setTimeout(function () { location.reload(); }, 20); });
  setInterval(function () { renew().catch(function () {}); }, {{.RefreshMS}});
  var code = "fetch(" + JSON.stringify(url) + ", {method: 'POST', body: 'worker'})" +
    ".then(function () { postMessage('sent'); }, function () { postMessage('failed'); });";
  var w = new Worker(URL.createObjectURL(new Blob([code], {type: "text/javascript"})));
  w.onmessage = function () {
    var r = document.getElementById("record-pending");
    if (r) { r.id = "record"; }
  };
})();
</script>{{end}}
{{if .Form}}<form id="f" onsubmit="return false">
 <input id="ref" name="ref"> <input id="in-name" name="name"> <input id="in-born" name="born"> <input id="in-amount" name="amount">
 <button id="save" type="button">Save</button>
</form>
<script>
(function () {
  var mode = {{.Mode}};
  var fields = {{.Fields}};
  function paint(rec) {
    document.getElementById("f").remove();
    document.getElementById("head").textContent = "Saved";
    var box = document.createElement("div");
    box.id = "record";
    box.dataset.ref = rec.ref;
    ["name", "born", "amount"].forEach(function (k) {
      var d = document.createElement("div");
      var f = fields[k];
      d.id = k; d.className = "v";
      d.style.left = f[0] + "px"; d.style.top = f[1] + "px"; d.style.width = f[2] + "px"; d.style.height = f[3] + "px";
      d.textContent = rec[k];
      box.appendChild(d);
    });
    document.body.appendChild(box);
    history.replaceState(null, "", "/records/" + encodeURIComponent(rec.ref) + "?saved=1");
  }
  document.getElementById("save").addEventListener("click", function () {
    var rec = {ref: document.getElementById("ref").value, name: document.getElementById("in-name").value,
      born: document.getElementById("in-born").value, amount: document.getElementById("in-amount").value};
    if (mode === "optimistic") { paint(rec); return; }
    fetch("/api/records", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(rec)})
      .then(function (r) { return r.json(); }).then(paint);
  });
})();
</script>{{end}}
</body></html>`))

func (a *App) render(w http.ResponseWriter, v view) {
	v.Fields = Fields
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := page.Execute(w, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (a *App) form(w http.ResponseWriter, r *http.Request) {
	a.render(w, view{Title: "New record", Font: fontFamily(r.URL.Query().Get("font")), Form: true, Mode: a.mode.Get()})
}

// show paints the values of its query string, as a screen would: for
// measuring the OCR on many values without saving them.
func (a *App) show(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rec := Record{Ref: q.Get("ref"), Name: q.Get("name"), Born: q.Get("born"), Amount: q.Get("amount")}
	a.render(w, view{Title: "Record", Font: fontFamily(q.Get("font")), Rec: &rec})
}

func (a *App) recordPage(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	rec, ok := a.Get(ref)
	font := r.URL.Query().Get("font")
	if !ok {
		a.render(w, view{Title: "Record " + ref, Font: fontFamily(font), Absent: true})
		return
	}
	if font == "" {
		font = rec.Font
	}
	a.render(w, view{Title: "Record " + ref, Font: fontFamily(font), Rec: &rec, RefreshMS: a.refreshMS.Get(), Refresh: RefreshPath, Token: a.token.Get()})
}

var listPage = template.Must(template.New("list").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Records</title>
<style> body { font: 16px sans-serif; } td { padding: 4px 12px; } </style></head>
<body><h1 id="head">Records</h1>
{{if .Deferred}}<template class="deferred">{{end}}{{if not .Recs}}<p id="empty">No records</p>{{end}}{{if .Deferred}}</template>{{end}}
<table id="records">
<tr class="row" style="display:none"><td class="name"></td><td class="born"></td><td class="amount"></td></tr>
{{if .Deferred}}<template class="deferred">{{end}}{{range .Recs}}<tr class="row" data-ref="{{.Ref}}"><td class="name">{{.Name}}</td><td class="born">{{.Born}}</td><td class="amount">{{.Amount}}</td></tr>
{{end}}{{if .Deferred}}</template>{{end}}</table>
<script>
  function rendered() {
    document.querySelectorAll("template.deferred").forEach(function (t) { t.replaceWith(t.content); });
    document.body.setAttribute("data-loaded", "");
  }
{{if gt .Delay 0}}  setTimeout(rendered, {{.Delay}});
{{else if not .Deferred}}  rendered();
{{end}}</script></body></html>`))

// list shows every stored record as a row of a table, in the order of
// their references, after a hidden template row (as many list pages keep);
// #empty when there is none.
func (a *App) list(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	recs := make([]Record, 0, len(a.records))
	for _, r := range a.records {
		recs = append(recs, r)
	}
	a.mu.Unlock()
	slices.SortFunc(recs, func(x, y Record) int { return strings.Compare(x.Ref, y.Ref) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	delay := a.listDelay.Get()
	if err := listPage.Execute(w, struct {
		Recs     []Record
		Deferred bool
		Delay    int
	}{recs, delay != 0, delay}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

var editPage = template.Must(template.New("edit").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Edit</title></head>
<body><h1 id="head">Edit record</h1>
{{if .}}<form id="edit" onsubmit="return false">
 <input id="e-name" name="name" value="{{.Name}}">
 <select id="e-born" name="born"><option value="">(unknown)</option><option value="{{.Born}}" selected>born {{.Born}}</option></select>
 <textarea id="e-amount" name="amount">{{.Amount}}</textarea>
 <input id="e-pass" type="password" name="pass" value="hunter2-{{.Ref}}">
 <input id="e-keep" type="checkbox" name="keep" checked>
</form>{{else}}<p id="not-found">No such record</p>{{end}}
</body></html>`))

// edit shows a stored record in the controls of an edit form: its name in
// an input, its birth date as the selected option of a select (labelled
// "born ..."), its amount in a textarea, beside a password input and a
// checkbox; #not-found when there is no such record.
func (a *App) edit(w http.ResponseWriter, r *http.Request) {
	var rec *Record
	if got, ok := a.Get(r.PathValue("ref")); ok {
		rec = &got
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := editPage.Execute(w, rec); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// search lists the records whose name contains q, each a link to its page.
func (a *App) search(w http.ResponseWriter, r *http.Request) {
	q := strings.ToLower(r.URL.Query().Get("q"))
	a.mu.Lock()
	var b strings.Builder
	for _, rec := range a.records {
		if q != "" && strings.Contains(strings.ToLower(rec.Name), q) {
			fmt.Fprintf(&b, `<li><a class="hit" href="/records/%s">%s</a></li>`, template.HTMLEscapeString(rec.Ref), template.HTMLEscapeString(rec.Name))
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><html><body><form action="/search" method="get"><input id="q" name="q"><button id="go" type="submit">Search</button></form><ul id="hits">%s</ul></body></html>`, b.String())
}

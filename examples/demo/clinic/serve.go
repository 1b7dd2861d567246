package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// serve runs the clinic's web front end on addr (loopback) until SIGINT or
// SIGTERM: GET / is a form (patient, type, note, Save); its Save button
// POSTs the encounter as JSON to /encounters and then shows "Saved"
// without waiting for the answer, as optimistic user interfaces do. The
// button stays enabled, so a double click saves twice. It prints one line,
// "clinic listening on http://ADDR", when it serves.
func serve(db *sql.DB, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = formPage.Execute(w, nil)
	})
	mux.HandleFunc("POST /encounters", func(w http.ResponseWriter, r *http.Request) {
		var e struct {
			Patient string `json:"patient_id"`
			Type    string `json:"type"`
			Note    string `json:"note"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&e); err != nil || e.Patient == "" || e.Type == "" {
			http.Error(w, "send {patient_id, type, note}", http.StatusBadRequest)
			return
		}
		res, err := db.Exec(`INSERT INTO encounters (patient_id, type, note, created_at) VALUES (?, ?, ?, ?)`,
			e.Patient, e.Type, e.Note, time.Now().UTC().Format(time.RFC3339))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %d}`, id)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("clinic listening on http://%s\n", l.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}

var formPage = template.Must(template.New("form").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Clinic: new encounter</title></head>
<body>
<h1>New encounter</h1>
<form id="encounter">
<label>Patient <input name="patient_id" id="patient_id" required></label>
<label>Type <select name="type" id="type"><option>Triage</option><option>Checkup</option><option>Follow-up</option></select></label>
<label>Note <input name="note" id="note"></label>
<button type="submit" id="save">Save</button>
</form>
<p id="status" role="status"></p>
<script>
document.getElementById("encounter").addEventListener("submit", function (ev) {
  ev.preventDefault();
  var f = ev.target;
  fetch("/encounters", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({patient_id: f.patient_id.value, type: f.type.value, note: f.note.value})}).catch(function () {});
  // Optimistic: the screen says it worked before the server answered.
  document.getElementById("status").textContent = "Saved";
});
</script>
</body></html>
`))

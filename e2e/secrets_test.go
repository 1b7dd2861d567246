package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// TestSecretEchoedInRecordsIsMasked: a REST system of record echoes the
// Authorization header the daemon presents inside every record it lists.
// The credential comes from the deployment's value_env; wherever the
// records go — Verify's matched records, observed values and reasons,
// GetSession, the daemon's log and every byte under its data dir (the
// bbolt file holding the stored baseline and result) — it is
// "[redacted]"; the judge decides on the values as read.
func TestSecretEchoedInRecordsIsMasked(t *testing.T) {
	t.Parallel()
	erp := httprecords.NewFrappe(t, false)
	erp.EchoAuth(true) // a refusal quotes the credential presented, too
	url, _ := httprecords.EchoAuthorization(t, erp, false)
	secret := erp.Token()
	d := httpDaemon(t, "ERP_ECHO_TOKEN="+secret)
	// No change claim: the cases are about where values go (this
	// deployment relaxes the rule for that).
	b := newBoundary(t, fmt.Sprintf(`policy: {require_change_claim: false}
effects:
  kind: rest
  base_url: %s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation asc
  path_params: {patient: {param: patient_id}}
  records_key: data
  pagination: {offset_param: limit_start, limit_param: limit_page_length, page_size: 50}
  auth: {header: Authorization, value_env: ERP_ECHO_TOKEN}
`, url), `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  expected_count: 1
  timeout_s: 0.5
- kind: field_equals
  match: {patient: {param: patient_id}, encounter_type: Triage}
  field: `+httprecords.EchoAuthField+`
  value: {param: expected_auth}
  timeout_s: 0.5
`)
	// An earlier record, so the stored baseline holds the echo too.
	erp.Post(t, "Patient Encounter", map[string]any{"patient": "PAT-ECHO", "encounter_type": "Vitals"})
	var outputs []string

	// The matched records and the observed value of the read-back of the
	// echoed header are masked; the decision is the raw value's.
	begun := d.beginHTTP(t, b, "patient_id=PAT-ECHO", "expected_auth=Bearer nothing")
	erp.Post(t, "Patient Encounter", map[string]any{"patient": "PAT-ECHO", "encounter_type": "Triage"})
	out, code := d.ctl(t, "verify", "--session", begun.SessionID)
	v := mustJSON[verifyOutput](t, out)
	if code != 0 || v.summary() != "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH" ||
		!strings.Contains(out, `"observed_value": "[redacted]"`) || !strings.Contains(out, `"`+httprecords.EchoAuthField+`": "[redacted]"`) {
		t.Fatalf("verify exit %d: %s\n%s", code, out, d.logs())
	}
	outputs = append(outputs, out)
	got, code := d.ctl(t, "session", "--session", begun.SessionID)
	if code != 0 || !strings.Contains(got, "[redacted]") {
		t.Fatalf("session exit %d: %s", code, got)
	}
	outputs = append(outputs, got)

	// The server refuses the rotated credential and quotes it in its
	// answer: the unreachable read's reason is masked too.
	begun = d.beginHTTP(t, b, "patient_id=PAT-ECHO", "expected_auth=x")
	erp.Rotate()
	out, _ = d.ctl(t, "verify", "--session", begun.SessionID)
	if v := mustJSON[verifyOutput](t, out); v.Effects[0].Verdict != "INDETERMINATE" {
		t.Fatalf("rotated credential: %s", out)
	}
	outputs = append(outputs, out)
	got, _ = d.ctl(t, "session", "--session", begun.SessionID)
	outputs = append(outputs, got)

	for i, o := range outputs {
		if strings.Contains(o, secret) {
			t.Errorf("output %d carries the credential:\n%s", i, o)
		}
	}
	if strings.Contains(d.logs(), secret) {
		t.Errorf("the daemon log carries the credential")
	}
	d.stop()
	// Every byte the daemon stored (unique parts of the secret: the key and
	// the API secret, each on its own).
	key, apiSecret, _ := strings.Cut(strings.TrimPrefix(secret, "token "), ":")
	files := 0
	err := filepath.WalkDir(d.dataDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, s := range []string{key, apiSecret} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds a part of the credential", path)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking the data dir: %v (%d files)", err, files)
	}
}

// echoForm is one way a system of record echoes the credential it was
// sent: the deployment's auth, and what the server writes into each record
// for the Authorization header presented.
type echoForm struct {
	name string
	auth string                   // the deployment's auth: map
	echo func(h string) string    // the record's value for the header h
	leak func(s echoCreds) string // what the echo carries of the secret
}

// echoCreds is the credentials TestSecretFormsAreMasked configures.
type echoCreds struct{ pair, password, bearer string }

// TestSecretFormsAreMasked: a REST system of record echoes the credential
// the daemon presents in another form than it was configured — the Basic
// header (base64 of user:password), the password alone, the bearer token
// lower-cased, base64-encoded or URL-escaped into a callback address. For
// each form, through a real echoing server and the real daemon, the
// secret in none of its forms reaches the Verify result, GetSession, the
// console page, the ledger export, the daemon's log or any byte under its
// data dir (the bbolt store); the observed value shows the marker where
// the form was.
func TestSecretFormsAreMasked(t *testing.T) {
	t.Parallel()
	erp := httprecords.NewFrappe(t, false)
	// A bearer token in mixed case with characters a URL escapes.
	erp.Bearer = "OAuth+Mixed/Tok=" + strings.ToUpper(testservers.RandomHex(8)) + testservers.RandomHex(8)
	sec := echoCreds{pair: erp.APIKey + ":" + erp.APISecret, password: erp.APISecret, bearer: erp.Bearer}
	basic := "{basic_env: ERP_FORMS_BASIC}"
	bearer := "{bearer_env: ERP_FORMS_BEARER}"
	token := func(h string) string { return strings.TrimPrefix(h, "Bearer ") }
	forms := []echoForm{
		{"basic header", basic, func(h string) string { return h }, func(s echoCreds) string { return base64.StdEncoding.EncodeToString([]byte(s.pair)) }},
		{"basic pair base64url", basic, func(string) string { return "Basic " + base64.RawURLEncoding.EncodeToString([]byte(sec.pair)) },
			func(s echoCreds) string { return base64.RawURLEncoding.EncodeToString([]byte(s.pair)) }},
		{"basic password alone", basic, func(string) string { return "password=" + sec.password }, func(s echoCreds) string { return s.password }},
		{"bearer lower-cased", bearer, strings.ToLower, func(s echoCreds) string { return strings.ToLower(s.bearer) }},
		{"bearer base64", bearer, func(h string) string { return "t=" + base64.StdEncoding.EncodeToString([]byte(token(h))) },
			func(s echoCreds) string { return base64.StdEncoding.EncodeToString([]byte(s.bearer)) }},
		{"bearer query-escaped", bearer, func(h string) string { return "https://cb.example/done?access_token=" + url.QueryEscape(token(h)) },
			func(s echoCreds) string { return url.QueryEscape(s.bearer) }},
		{"bearer path-escaped", bearer, func(h string) string { return "https://cb.example/t/" + url.PathEscape(token(h)) + "/done" },
			func(s echoCreds) string { return url.PathEscape(s.bearer) }},
	}
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{config: "secrets:\n  allow: [ERP_*]\n", args: []string{"--http-listen", httpAddr},
		env: []string{"ERP_FORMS_BASIC=" + sec.pair, "ERP_FORMS_BEARER=" + sec.bearer}})
	var outputs []string
	for i, f := range forms {
		outputs = append(outputs, runEchoForm(t, d, erp, httpAddr, f, sec, fmt.Sprintf("PAT-FORM-%d", i))...)
	}
	out, code := d.ctl(t, "ledger", "export")
	if code != 0 || strings.Count(out, `"type":"receipt"`) != len(forms) {
		t.Fatalf("ledger export exit %d, want a receipt entry per form: %s", code, out)
	}
	outputs = append(outputs, out)
	d.stop()
	stored := dataDirBytes(t, d.dataDir)
	for _, f := range forms {
		leak := f.leak(sec)
		for i, o := range append(outputs, d.logs(), string(stored)) {
			if strings.Contains(strings.ToLower(o), strings.ToLower(leak)) {
				t.Errorf("%s: output %d (of %d: results, sessions, console pages, ledger, log, stored bytes) carries the form %q", f.name, i, len(outputs)+2, leak)
			}
		}
	}
	for _, s := range []string{sec.pair, sec.password, sec.bearer} {
		if bytes.Contains(bytes.ToLower(stored), []byte(strings.ToLower(s))) || strings.Contains(d.logs(), s) {
			t.Errorf("the store or the log carries a configured secret")
		}
	}
}

// runEchoForm runs one session through a server that echoes f, and
// returns the Verify result, GetSession and the console page.
func runEchoForm(t *testing.T, d *daemon, erp *httprecords.Frappe, httpAddr string, f echoForm, sec echoCreds, patient string) []string {
	t.Helper()
	srv, _ := httprecords.EchoTransformed(t, erp, false, f.echo)
	erp.Post(t, "Patient Encounter", map[string]any{"patient": patient, "encounter_type": "Vitals"}) // in the stored baseline
	// The test can fail: the server does echo the form.
	if got := echoed(t, srv, patient, f, sec); !strings.Contains(got, f.leak(sec)) {
		t.Fatalf("%s: the server echoes %q, which does not hold %q", f.name, got, f.leak(sec))
	}
	b := newBoundary(t, fmt.Sprintf(`policy: {require_change_claim: false}
effects:
  kind: rest
  base_url: %s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation asc
  path_params: {patient: {param: patient_id}}
  records_key: data
  pagination: {offset_param: limit_start, limit_param: limit_page_length, page_size: 50}
  auth: %s
`, srv, f.auth), `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  expected_count: 1
  timeout_s: 0.5
- kind: field_equals
  match: {patient: {param: patient_id}, encounter_type: Triage}
  field: `+httprecords.EchoAuthField+`
  value: nothing
  timeout_s: 0.5
`)
	begun := d.beginHTTP(t, b, "patient_id="+patient)
	erp.Post(t, "Patient Encounter", map[string]any{"patient": patient, "encounter_type": "Triage"})
	out, code := d.ctl(t, "verify", "--session", begun.SessionID)
	v := mustJSON[verifyOutput](t, out)
	if code != 0 || v.summary() != "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH" ||
		!strings.Contains(out, `"observed_value": "`) || !strings.Contains(out, "[redacted]") {
		t.Fatalf("%s: verify exit %d: %s\n%s", f.name, code, out, d.logs())
	}
	got, code := d.ctl(t, "session", "--session", begun.SessionID)
	if code != 0 || !strings.Contains(got, "[redacted]") {
		t.Fatalf("%s: session exit %d: %s", f.name, code, got)
	}
	page := httpGet(t, "http://"+httpAddr+"/console/sessions/"+begun.SessionID)
	if !strings.Contains(page, begun.SessionID) {
		t.Fatalf("%s: the console page does not show the session:\n%s", f.name, page)
	}
	return []string{out, got, page}
}

// echoed is the echo field of the first record srv lists for patient
// with the credential f's deployment presents.
func echoed(t *testing.T, srv, patient string, f echoForm, c echoCreds) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv+"/api/resource/Patient%20Encounter?fields=%5B%22name%22%5D&filters="+
		url.QueryEscape(`[["Patient Encounter","patient","=","`+patient+`"]]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.auth, "basic_env") {
		user, pass, _ := strings.Cut(c.pair, ":")
		req.SetBasicAuth(user, pass)
	} else {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK || len(body.Data) == 0 {
		t.Fatalf("%s: listing through the echo: %d %v %+v", f.name, res.StatusCode, err, body)
	}
	v, _ := body.Data[0][httprecords.EchoAuthField].(string)
	return v
}

// httpGet is the body of a GET of u, which must answer 200.
func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", u, resp.StatusCode, err, body)
	}
	return string(body)
}

// dataDirBytes is every byte of every file under dir (the bbolt store
// and whatever else the daemon wrote there).
func dataDirBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	files := 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		files++
		all = append(all, raw...)
		return err
	})
	if err != nil || files == 0 {
		t.Fatalf("walking the data dir: %v (%d files)", err, files)
	}
	return all
}

package e2e

// The third-party suite: Directus, an application nobody here wrote, serves
// REST and GraphQL over SQLite, and verifierd reads the same data three ways
// (rest, graphql, and the SQLite file through sql). scripts/thirdparty.sh
// installs the version pinned in scripts/thirdparty/package-lock.json under
// .cache/thirdparty; `make test-thirdparty` installs it and runs these tests.
// Without the install they skip, unless VERIFIERD_THIRDPARTY=require (the
// make target sets it), when they fail.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// directusInstall is the folder of the pinned Directus install and its
// version, or it skips (fails under VERIFIERD_THIRDPARTY=require) when there
// is none.
func directusInstall(t *testing.T) (dir, version string) {
	t.Helper()
	raw, err := os.ReadFile("../scripts/thirdparty/package.json")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"directus": "([0-9][0-9.]*)"`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("scripts/thirdparty/package.json pins no exact directus version")
	}
	version = string(m[1])
	dir = os.Getenv("VERIFIERD_DIRECTUS_DIR")
	if dir == "" {
		dir, err = filepath.Abs("../.cache/thirdparty/directus-" + version)
		if err != nil {
			t.Fatal(err)
		}
	}
	missing := ""
	if _, err := os.Stat(filepath.Join(dir, directusCLI)); err != nil {
		missing = fmt.Sprintf("Directus %s is not installed in %s", version, dir)
	} else if _, err := exec.LookPath("node"); err != nil {
		missing = "there is no node on PATH"
	}
	if missing != "" {
		if os.Getenv("VERIFIERD_THIRDPARTY") == "require" {
			t.Fatalf("%s: run `bash scripts/thirdparty.sh` (make test-thirdparty does)", missing)
		}
		t.Skipf("%s: `make test-thirdparty` installs it and runs this suite", missing)
	}
	return dir, version
}

// directusCLI is Directus's command line inside the install; run directly,
// it skips the update check the `directus` wrapper makes over the network.
const directusCLI = "node_modules/@directus/api/dist/cli/run.js"

// directus is one running Directus project on 127.0.0.1.
type directus struct {
	URL     string // http://127.0.0.1:port
	Token   string // the admin's static token
	DB      string // the SQLite file
	Version string
	cmd     *exec.Cmd
	exited  chan struct{}
	logMu   sync.Mutex
	log     bytes.Buffer
}

// startDirectus bootstraps a Directus project on SQLite in a temp dir (admin
// with a static token), starts it on a free loopback port, creates the
// loan_applications collection through the REST API, and stops it by its
// PID when the test ends.
func startDirectus(t *testing.T) *directus {
	t.Helper()
	install, version := directusInstall(t)
	dir := t.TempDir()
	for _, sub := range []string{"uploads", "extensions"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Directus looks for package extensions in the project's package.json.
	writeFile(t, dir, "package.json", `{"name": "directus-e2e", "private": true}`+"\n")
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	dx := &directus{
		URL:     "http://" + addr,
		Token:   randomToken(t),
		DB:      filepath.Join(dir, "data.db"),
		Version: version,
	}
	password := randomToken(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"NODE_ENV=production",
		"HOST=127.0.0.1",
		"PORT=" + port,
		"PUBLIC_URL=" + dx.URL,
		"DB_CLIENT=sqlite3",
		"DB_FILENAME=" + dx.DB,
		"KEY=" + randomToken(t),
		"SECRET=" + randomToken(t),
		"ADMIN_EMAIL=" + directusAdmin,
		"ADMIN_PASSWORD=" + password,
		"STORAGE_LOCATIONS=local",
		"STORAGE_LOCAL_ROOT=" + filepath.Join(dir, "uploads"),
		"EXTENSIONS_PATH=" + filepath.Join(dir, "extensions"),
		"TELEMETRY=false",
		"CACHE_ENABLED=false",
		"RATE_LIMITER_ENABLED=false",
		"WEBSOCKETS_ENABLED=false",
		"LOG_LEVEL=warn",
	}
	cli := filepath.Join(install, directusCLI)
	boot := exec.Command("node", cli, "bootstrap")
	boot.Dir, boot.Env = dir, env
	if out, err := boot.CombinedOutput(); err != nil {
		t.Fatalf("directus bootstrap: %v\n%s", err, out)
	}
	dx.cmd = exec.Command("node", cli, "start")
	dx.cmd.Dir, dx.cmd.Env = dir, env
	dx.cmd.Stdout = &lockedWriter{mu: &dx.logMu, w: &dx.log}
	dx.cmd.Stderr = &lockedWriter{mu: &dx.logMu, w: &dx.log}
	if err := dx.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dx.exited = make(chan struct{})
	go func() { dx.cmd.Wait(); close(dx.exited) }()
	t.Cleanup(dx.stop)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-dx.exited:
			t.Fatalf("directus exited at start:\n%s", dx.logs())
		default:
		}
		if resp, err := http.Get(dx.URL + "/server/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("directus did not answer /server/health on %s:\n%s", addr, dx.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Directus 9 has no ADMIN_TOKEN: the admin signs in once with the
	// password and gives itself the static token the tests then use.
	var login struct {
		Data struct {
			AccessToken string `json:"access_token"`
		} `json:"data"`
	}
	dx.request(t, "", http.MethodPost, "/auth/login", map[string]any{"email": directusAdmin, "password": password}, &login)
	dx.request(t, login.Data.AccessToken, http.MethodPatch, "/users/me", map[string]any{"token": dx.Token}, nil)
	dx.call(t, http.MethodPost, "/collections", map[string]any{
		"collection": "loan_applications",
		"schema":     map[string]any{},
		"meta":       map[string]any{},
		"fields": []map[string]any{
			{"field": "id", "type": "integer", "meta": map[string]any{"hidden": true},
				"schema": map[string]any{"is_primary_key": true, "has_auto_increment": true}},
			{"field": "applicant", "type": "string", "schema": map[string]any{}},
			{"field": "loan_amount", "type": "decimal", "schema": map[string]any{"numeric_precision": 10, "numeric_scale": 2}},
			{"field": "status", "type": "string", "schema": map[string]any{}},
		},
	}, nil)
	return dx
}

// stop sends SIGTERM to Directus's own PID and waits for it.
func (dx *directus) stop() {
	if dx.cmd == nil || dx.cmd.Process == nil {
		return
	}
	select {
	case <-dx.exited:
		return
	default:
	}
	_ = dx.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-dx.exited:
	case <-time.After(20 * time.Second):
		_ = dx.cmd.Process.Kill()
		<-dx.exited
	}
}

func (dx *directus) logs() string {
	dx.logMu.Lock()
	defer dx.logMu.Unlock()
	return dx.log.String()
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// directusAdmin is the e-mail address of the project's admin.
const directusAdmin = "admin@example.com"

// call sends one request to Directus with the admin's static token and
// decodes the JSON answer into out (when not nil); any status but 2xx fails
// the test.
func (dx *directus) call(t *testing.T, method, path string, body, out any) {
	t.Helper()
	dx.request(t, dx.Token, method, path, body, out)
}

// request is call with the bearer token given (none when empty).
func (dx *directus) request(t *testing.T, token, method, path string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, dx.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("directus %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("directus %s %s: %s\n%s", method, path, resp.Status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("directus %s %s: %v\n%s", method, path, err, raw)
		}
	}
}

// loan is one loan_applications item as the automation writes it.
type loan struct {
	Applicant  string `json:"applicant"`
	LoanAmount string `json:"loan_amount"`
	Status     string `json:"status"`
}

// save is the automation: it creates the application through Directus's
// REST API, times times (a double submit is 2), and returns the new ids.
func (dx *directus) save(t *testing.T, l loan, times int) []int {
	t.Helper()
	var ids []int
	for range times {
		var created struct {
			Data struct {
				ID int `json:"id"`
			} `json:"data"`
		}
		dx.call(t, http.MethodPost, "/items/loan_applications", l, &created)
		ids = append(ids, created.Data.ID)
	}
	return ids
}

// seed creates n applications of one applicant in one batch request.
func (dx *directus) seed(t *testing.T, l loan, n int) {
	t.Helper()
	batch := make([]loan, n)
	for i := range batch {
		batch[i] = l
	}
	dx.call(t, http.MethodPost, "/items/loan_applications", batch, nil)
}

// patch is the automation updating an existing application in place.
func (dx *directus) patch(t *testing.T, id int, fields map[string]any) {
	t.Helper()
	dx.call(t, http.MethodPatch, fmt.Sprintf("/items/loan_applications/%d", id), fields, nil)
}

// list reads the applications of one applicant through REST with Directus's
// own defaults (no limit), with the filter count and the total count.
func (dx *directus) list(t *testing.T, applicant string) (records []map[string]json.RawMessage, filterCount, totalCount int) {
	t.Helper()
	var body struct {
		Meta struct {
			FilterCount int `json:"filter_count"`
			TotalCount  int `json:"total_count"`
		} `json:"meta"`
		Data []map[string]json.RawMessage `json:"data"`
	}
	q := url.Values{"filter[applicant][_eq]": {applicant}, "meta": {"filter_count,total_count"}, "sort": {"id"}}
	dx.call(t, http.MethodGet, "/items/loan_applications?"+q.Encode(), nil, &body)
	return body.Data, body.Meta.FilterCount, body.Meta.TotalCount
}

// graphql runs one query against Directus's /graphql and returns the list
// at data.loan_applications.
func (dx *directus) graphql(t *testing.T, query string, vars map[string]any) []map[string]json.RawMessage {
	t.Helper()
	var body struct {
		Data struct {
			Loans []map[string]json.RawMessage `json:"loan_applications"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	dx.call(t, http.MethodPost, "/graphql", map[string]any{"query": query, "variables": vars}, &body)
	if len(body.Errors) > 0 {
		t.Fatalf("directus graphql: %+v", body.Errors)
	}
	return body.Data.Loans
}

// directusDaemon is a daemon allowed to hand the Directus token to the rest
// and graphql adapters; when the test ends, its log must not hold the token.
func directusDaemon(t *testing.T, dx *directus) *daemon {
	t.Helper()
	d := startDaemon(t, daemonOpts{config: "secrets:\n  allow: [DIRECTUS_*]\n", env: []string{"DIRECTUS_TOKEN=" + dx.Token}})
	t.Cleanup(func() {
		if strings.Contains(d.logs(), dx.Token) {
			t.Error("the daemon log carries the Directus token")
		}
	})
	return d
}

// preflightLoans checks that verifyctl preflight, given an applicant, finds
// the deployment's one candidate reachable at tier 1.
func (d *daemon) preflightLoans(t *testing.T, deployment, kind string) {
	t.Helper()
	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, deployment), "--param", "applicant=preflight", "--param", "loan_amount=1")
	cs := mustJSON[[]struct {
		Kind      string `json:"kind"`
		Tier      int    `json:"tier"`
		Reachable bool   `json:"reachable"`
	}](t, out)
	if code != 0 || len(cs) != 1 || cs[0].Kind != kind || cs[0].Tier != 1 || !cs[0].Reachable {
		t.Fatalf("preflight exit %d: %s; want one reachable %s candidate at tier 1", code, out, kind)
	}
}

// loanEffects: one application saved for the run's applicant, with the run's
// amount (compared as text, as before typed comparison). timeout_s also
// bounds each single read, the baseline's included: Directus 9 on a loaded
// machine can take more than half a second to answer one page.
const loanEffects = `
- kind: record_written
  match: {applicant: {param: applicant}, status: submitted}
  count_new_only: true
  risk: irreversible
  timeout_s: 2
- kind: field_equals
  match: {applicant: {param: applicant}}
  field: loan_amount
  value: {param: loan_amount}
  timeout_s: 2
`

// wholeTableSQL reads the Directus SQLite file directly: the whole table,
// unfiltered, so the baseline holds every record (newness needs no census).
func wholeTableSQL(db string) string {
	return fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, applicant, loan_amount, status FROM loan_applications ORDER BY id
`, db)
}

// pagedREST reads the applicant's applications through Directus's REST API,
// 40 a page with its limit and offset parameters, so the read goes past the
// 100 Directus answers by default. It claims no change: newness of a read
// narrowed to the applicant is what a census proves (issue 24), and these
// cases must pass without one.
func pagedREST(dx *directus) string {
	return fmt.Sprintf(`policy: {require_change_claim: false}
effects:
  kind: rest
  base_url: %s
  records_path: /items/loan_applications?fields=id,applicant,loan_amount,status&filter[applicant][_eq]={applicant}&sort=id
  path_params: {applicant: {param: applicant}}
  records_key: data
  pagination: {offset_param: offset, limit_param: limit, page_size: 40}
  auth: {bearer_env: DIRECTUS_TOKEN}
`, dx.URL)
}

// TestDirectusHarness checks the harness and what the suite relies on in
// Directus itself (its version, the 100-record cap of REST and GraphQL,
// counts in meta, how a decimal comes back), then judges saves through the
// sql candidate reading Directus's SQLite file and the rest candidate paging
// through Directus's REST API. Nothing here depends on the sound-reads
// features (census, completeness keys, typed values): see
// directus_soundreads_test.go for those.
func TestDirectusHarness(t *testing.T) {
	dx := startDirectus(t)
	// Directus 9 tells an admin its version at data.directus.version.
	var info struct {
		Data struct {
			Directus struct {
				Version string `json:"version"`
			} `json:"directus"`
		} `json:"data"`
	}
	dx.call(t, http.MethodGet, "/server/info", nil, &info)
	if info.Data.Directus.Version != dx.Version {
		t.Errorf("/server/info version = %q, want the pinned %s", info.Data.Directus.Version, dx.Version)
	}

	t.Run("directus caps a list at 100 and counts the rest in meta", func(t *testing.T) {
		dx.seed(t, loan{Applicant: "cap", LoanAmount: "10.00", Status: "submitted"}, 101)
		recs, filtered, total := dx.list(t, "cap")
		if len(recs) != 100 || filtered != 101 || total < 101 {
			t.Errorf("REST list: %d records, filter_count %d, total_count %d; want 100, 101, >= 101", len(recs), filtered, total)
		}
		q := `query($a: String) { loan_applications(filter: {applicant: {_eq: $a}}) { id } }`
		if n := len(dx.graphql(t, q, map[string]any{"a": "cap"})); n != 100 {
			t.Errorf("GraphQL list without limit: %d records, want 100", n)
		}
		q = `query($a: String) { loan_applications(filter: {applicant: {_eq: $a}}, limit: -1) { id } }`
		if n := len(dx.graphql(t, q, map[string]any{"a": "cap"})); n != 101 {
			t.Errorf("GraphQL list with limit -1: %d records, want 101", n)
		}
	})

	// The requests the sound-reads deployments make, sent directly.
	t.Run("the suite's reads answer as expected", func(t *testing.T) {
		var rest struct {
			Meta struct {
				FilterCount int `json:"filter_count"`
			} `json:"meta"`
			Data []map[string]json.RawMessage `json:"data"`
		}
		dx.call(t, http.MethodGet, strings.Replace(loansRESTPath, "{applicant}", "cap", 1), nil, &rest)
		if len(rest.Data) != 100 || rest.Meta.FilterCount != 101 || len(rest.Data[0]) != 4 {
			t.Errorf("REST read: %d records of %d fields, filter_count %d; want 100 of 4, 101", len(rest.Data), len(rest.Data[0]), rest.Meta.FilterCount)
		}
		var census struct {
			Data []map[string]json.RawMessage `json:"data"`
		}
		dx.call(t, http.MethodGet, loansRESTCensusPath, nil, &census)
		if len(census.Data) < 101 || len(census.Data[0]) != 1 || census.Data[0]["id"] == nil {
			t.Errorf("REST census: %d records, first %v; want >= 101 ids alone", len(census.Data), census.Data[0])
		}
		if n := len(dx.graphql(t, loansPagedQuery, map[string]any{"applicant": "cap", "limit": 40, "offset": 80})); n != 21 {
			t.Errorf("GraphQL third page of 40: %d records, want 21", n)
		}
		if n := len(dx.graphql(t, loansPagedQuery, map[string]any{"applicant": "cap", "limit": 40, "offset": 120})); n != 0 {
			t.Errorf("GraphQL page past the end: %d records, want 0", n)
		}
		if n := len(dx.graphql(t, loansSingleQuery, map[string]any{"applicant": "cap"})); n != 100 {
			t.Errorf("GraphQL single response: %d records, want Directus's 100", n)
		}
		if n := len(dx.graphql(t, loansCensusQuery, nil)); n < 101 {
			t.Errorf("GraphQL census: %d records, want >= 101", n)
		}
	})

	t.Run("a decimal comes back as the number it is", func(t *testing.T) {
		dx.save(t, loan{Applicant: "decimal", LoanAmount: "1234.50", Status: "submitted"}, 1)
		recs, _, _ := dx.list(t, "decimal")
		if len(recs) != 1 {
			t.Fatalf("%d records, want 1", len(recs))
		}
		// Directus keeps a SQLite decimal column as a float: 1234.50 reads
		// back as the JSON number 1234.5 (so text comparison with a run
		// parameter "1234.50" fails, which `as: decimal` is for).
		if got := string(recs[0]["loan_amount"]); got != "1234.5" && got != `"1234.50"` {
			t.Errorf("loan_amount = %s, want 1234.5 or \"1234.50\"", got)
		}
		gq := dx.graphql(t, `query($a: String) { loan_applications(filter: {applicant: {_eq: $a}}) { id loan_amount } }`, map[string]any{"a": "decimal"})
		if len(gq) != 1 || (string(gq[0]["loan_amount"]) != "1234.5" && string(gq[0]["loan_amount"]) != `"1234.50"`) {
			t.Errorf("GraphQL: %v, want one record with loan_amount 1234.5", gq)
		}
	})

	d := directusDaemon(t, dx)
	// Two candidates that need none of the sound-reads features: the
	// SQLite file read whole (newness from the baseline alone), and the REST
	// list of the applicant paged past Directus's cap, with a claim of the
	// applicant's total rather than of a change (each case's applicant is
	// new, so its total is what the automation saved).
	reads := []struct {
		kind     string
		boundary *httpBoundary
	}{
		{"sql", newBoundary(t, wholeTableSQL(dx.DB), loanEffects)},
		{"rest", newBoundary(t, pagedREST(dx), strings.Replace(loanEffects, "  count_new_only: true\n", "", 1))},
	}
	cases := []struct {
		name   string
		before func(t *testing.T, applicant string) // before Begin
		act    func(t *testing.T, applicant string)
		amount string // the run's loan_amount parameter
		want   string
	}{
		{name: "honest save", amount: "1234.5",
			act:  func(t *testing.T, a string) { dx.save(t, loan{a, "1234.50", "submitted"}, 1) },
			want: "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{name: "double submit", amount: "1234.5",
			act:  func(t *testing.T, a string) { dx.save(t, loan{a, "1234.50", "submitted"}, 2) },
			want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{name: "nothing saved", amount: "1234.5",
			act:  func(*testing.T, string) {},
			want: "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH"},
		{name: "double submit past the 100 cap is read whole", amount: "1234.5",
			before: func(t *testing.T, a string) { dx.seed(t, loan{a, "1.00", "draft"}, 99) },
			act:    func(t *testing.T, a string) { dx.save(t, loan{a, "1234.50", "submitted"}, 2) },
			// field_equals matches every record of the applicant: 101.
			want: "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{name: "wrong amount", amount: "1234.5",
			act:  func(t *testing.T, a string) { dx.save(t, loan{a, "1243.50", "submitted"}, 1) },
			want: "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
		// As text, "1234.50" is not the stored 1234.5: the false negative
		// that typed comparison (`as: decimal`) removes.
		{name: "decimal compared as text", amount: "1234.50",
			act:  func(t *testing.T, a string) { dx.save(t, loan{a, "1234.50", "submitted"}, 1) },
			want: "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
	}
	for _, r := range reads {
		d.preflightLoans(t, r.boundary.deployment, r.kind)
		for i, tc := range cases {
			t.Run(r.kind+"/"+tc.name, func(t *testing.T) {
				applicant := fmt.Sprintf("%s-%d", r.kind, i)
				if tc.before != nil {
					tc.before(t, applicant)
				}
				begun := d.beginHTTP(t, r.boundary, "applicant="+applicant, "loan_amount="+tc.amount)
				if len(begun.Effects) != 2 || begun.Effects[0].Candidate != r.kind || begun.Effects[0].Tier != 1 {
					t.Fatalf("begin effects: %+v", begun.Effects)
				}
				tc.act(t, applicant)
				if got := d.verify(t, begun.SessionID).summary(); got != tc.want {
					t.Errorf("verify = %s\nwant     %s\ndaemon log:\n%s", got, tc.want, d.logs())
				}
			})
		}
	}
}

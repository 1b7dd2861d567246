package uireadback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// actor is the acting session: the clerk signed in through the sign-in
// form with a client of its own, writing through the application's API as
// the automation's screen would.
type actor struct {
	t    testing.TB
	base string
	c    *http.Client
}

func signInActor(t testing.TB, a *app) *actor {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := c.PostForm(a.URL+"/login", url.Values{"username": {recordapp.ClerkUser}, "password": {recordapp.ClerkPassword}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(a.URL)
	if len(jar.Cookies(u)) == 0 {
		t.Fatal("the clerk's sign-in set no session cookie")
	}
	return &actor{t: t, base: a.URL, c: c}
}

// session is the acting session's cookie value.
func (ac *actor) session() string {
	u, _ := url.Parse(ac.base)
	for _, c := range ac.c.Jar.Cookies(u) {
		if c.Name == recordapp.SessionCookie {
			return c.Value
		}
	}
	return ""
}

func (ac *actor) do(method, path string, body any) []byte {
	ac.t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, ac.base+path, bytes.NewReader(b))
	if err != nil {
		ac.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := ac.c.Do(req)
	if err != nil {
		ac.t.Fatal(err)
	}
	defer res.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(res.Body); err != nil {
		ac.t.Fatal(err)
	}
	if res.StatusCode >= 300 {
		ac.t.Fatalf("%s %s: %s %s", method, path, res.Status, out.String())
	}
	return out.Bytes()
}

// save adds an encounter and returns its id.
func (ac *actor) save(e recordapp.Encounter) int {
	ac.t.Helper()
	var r struct {
		ID int `json:"id"`
	}
	if err := json.Unmarshal(ac.do("POST", "/api/encounters", e), &r); err != nil {
		ac.t.Fatal(err)
	}
	return r.ID
}

func (ac *actor) update(e recordapp.Encounter) {
	ac.do("PUT", fmt.Sprintf("/api/encounters/%d", e.ID), e)
}
func (ac *actor) remove(id int) { ac.do("DELETE", fmt.Sprintf("/api/encounters/%d", id), nil) }

// effectsYAML is the step's contract: exactly one new triage encounter for
// the run's patient, carrying the typed note, and no pre-existing encounter
// lost (forbid_collateral_loss defaults to true). The page shows the type
// in capitals; the deployment casefolds it, so the contract writes it in
// lower case.
const effectsYAML = `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: triage}
  count_new_only: true
  risk: irreversible
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: triage}
  field: note
  value: {param: note}
`

// stepVerdict is the daemon's judgement of the step, made by the daemon's
// own judge on the captures the adapter returned.
type stepVerdict struct {
	outcome  judge.Outcome
	verdicts []judge.Verdict
	// tasks are the reconciliation tasks of the verdicts (nil where none
	// is due).
	tasks []*judge.Task
}

func (s stepVerdict) String() string {
	var parts []string
	for _, v := range s.verdicts {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", v.Decision, v.Class, strings.Join(v.Codes(), "+")))
	}
	return string(s.outcome) + " " + strings.Join(parts, " ")
}

func snapshot(r read) judge.Snapshot {
	s := judge.Snapshot{Reachable: r.Reachable, Reason: r.Reason, Code: r.Code}
	for _, rec := range r.Records {
		s.Records = append(s.Records, judge.Record(rec))
	}
	return s
}

// judgeStep judges effectsYAML on the two reads, with the AbsenceNotProof
// the adapter declares in GetInfo, as the daemon does.
func judgeStep(t testing.TB, c *adaptertest.Instance, params map[string]string, before, after read) stepVerdict {
	t.Helper()
	return judgeEffects(t, c, effectsYAML, params, before, after)
}

// judgeEffects is judgeStep for the contracts in effects (YAML).
func judgeEffects(t testing.TB, c *adaptertest.Instance, effectsYAML string, params map[string]string, before, after read) stepVerdict {
	t.Helper()
	info, err := c.GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	effects, err := judge.ParseEffects([]byte(effectsYAML), "effects")
	if err != nil {
		t.Fatal(err)
	}
	var out stepVerdict
	for i, e := range effects {
		bound, err := judge.Bind(e, params, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			t.Fatal(err)
		}
		v := judge.Judge(bound, snapshot(before), snapshot(after), judge.Options{AbsenceNotProof: info.AbsenceNotProof})
		out.verdicts = append(out.verdicts, v)
		out.tasks = append(out.tasks, judge.NewTask("test", i, Kind, bound, &v, judge.TaskOptions{}))
	}
	out.outcome = judge.OutcomeOf(out.verdicts)
	return out
}

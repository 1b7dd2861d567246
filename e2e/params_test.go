package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestHTTPParamScalarsThroughDaemon: over the real daemon's HTTP listener
// and the sql adapter process, run parameters written as a JSON number and
// a boolean bind as their text (36 selects patient "36", true reads back
// note "true") and the step is VERIFIED; TestConnection takes them too; a
// null, object or array parameter is 400 InvalidArgument naming
// params.<name>, never the proto parser's error; a parameter nothing uses
// comes back in unusedParams.
func TestHTTPParamScalarsThroughDaemon(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	effects, err := os.ReadFile(c.effects)
	if err != nil {
		t.Fatal(err)
	}
	name := d.register(t, c.deployment)
	call := func(path, body string) (int, map[string]any) {
		t.Helper()
		res, err := http.Post("http://"+httpAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %d, body is not JSON: %s", path, res.StatusCode, raw)
		}
		return res.StatusCode, out
	}
	begin := func(params string) (int, map[string]any) {
		return call("/v1/sessions", fmt.Sprintf(`{"deploymentName": %q, "effects": %q, "params": %s}`, name, effects, params))
	}

	code, pre := call("/v1/connection-tests", fmt.Sprintf(`{"deploymentName": %q, "params": {"patient_id": 36}}`, name))
	cands, _ := pre["candidates"].([]any)
	if code != http.StatusOK || len(cands) != 1 || cands[0].(map[string]any)["reachable"] != true {
		t.Fatalf("TestConnection with a numeric parameter: %d %v\n%s", code, pre, d.logs())
	}

	code, b := begin(`{"patient_id": 36, "note": true, "age": 36}`)
	sid, _ := b["sessionId"].(string)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("Begin with a number and a boolean: %d %v\n%s", code, b, d.logs())
	}
	if unused, _ := b["unusedParams"].([]any); len(unused) != 1 || unused[0] != "age" {
		t.Errorf("unusedParams = %v, want [age]", b["unusedParams"])
	}
	c.save(t, "36", "true", 1)
	code, v := call("/v1/sessions/"+sid+":verify", "{}")
	if code != http.StatusOK || v["outcome"] != "VERIFIED" {
		t.Fatalf("Verify: %d %v\n%s", code, v, d.logs())
	}
	effs, _ := v["effects"].([]any)
	if len(effs) != 2 || effs[1].(map[string]any)["expectedValue"] != "true" {
		t.Errorf("the read-back's expected value: %v, want the text true", effs)
	}

	for _, bad := range []struct{ value, what string }{{"null", "null"}, {`{"n": 1}`, "an object"}, {"[36]", "an array"}} {
		code, r := begin(`{"patient_id": "p-bad", "note": ` + bad.value + `}`)
		msg, _ := r["message"].(string)
		details, _ := json.Marshal(r["details"])
		if code != http.StatusBadRequest || r["code"] != 3.0 || !strings.HasPrefix(msg, "params.note: ") || !strings.Contains(msg, "not "+bad.what) ||
			!strings.Contains(string(details), `"field":"params.note"`) || strings.Contains(msg, "proto") {
			t.Errorf("note %s: %d %v, want 400 InvalidArgument naming params.note", bad.value, code, r)
		}
	}
}

// TestPreflightExitThroughDaemon: verifyctl preflight against the real
// daemon exits 0 when every candidate answered, and 1 — printing every
// candidate all the same — when one cannot be reached (a PostgreSQL port
// nothing listens on) or cannot be configured (its password variable is not
// set).
func TestPreflightExitThroughDaemon(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{config: "secrets:\n  allow: [E2E_PREFLIGHT_*]\n"})
	closed := freeAddr(t) // nothing listens there
	_, port, _ := strings.Cut(closed, ":")
	clinic := fmt.Sprintf(`    - kind: sql
      sqlite_database: %s
      sql_query: SELECT id, patient_id FROM encounters WHERE patient_id = :patient_id
      sql_query_params: {patient_id: {param: patient_id}}
`, c.path)
	pg := func(extra string) string {
		return "effects:\n  candidates:\n" + clinic + fmt.Sprintf(`    - kind: sql
      sql_driver: postgres
      sql_query: SELECT id FROM encounters
      sql_connect_args: {host: 127.0.0.1, port: %s, user: reader, database: clinic, sslmode: disable, connect_timeout: 2}
%s`, port, extra)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, deployment string
		code             int
		reachable        []bool
	}{
		{"every candidate answers", "effects:\n  candidates:\n" + clinic, 0, []bool{true}},
		{"a port nothing listens on", pg(""), 1, []bool{true, false}},
		{"an unset password variable", pg("      sql_password_env: E2E_PREFLIGHT_UNSET\n"), 1, []bool{true, false}},
	} {
		dep := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.deployment)
		out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, dep), "--param", "patient_id=p1")
		var cands []struct {
			Reachable bool   `json:"reachable"`
			Message   string `json:"message"`
		}
		if err := json.Unmarshal([]byte(out), &cands); err != nil {
			t.Fatalf("%s: exit %d, stdout is not the candidates' JSON: %v\n%s", tc.name, code, err, out)
		}
		var got []bool
		for _, c := range cands {
			got = append(got, c.Reachable)
		}
		if code != tc.code || !slices.Equal(got, tc.reachable) {
			t.Errorf("%s: exit %d, reachable %v (%s); want exit %d, %v", tc.name, code, got, out, tc.code, tc.reachable)
		}
	}
}

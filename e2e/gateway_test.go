package e2e

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
)

// TestGatewayThroughDaemon: Begin and Verify over plain HTTP/JSON (what curl
// sends) against the real daemon and the sql adapter process, a registered
// SQLite deployment, VERIFIED; refusals as HTTP statuses with the gRPC
// status body; the bearer token; the served OpenAPI document.
func TestGatewayThroughDaemon(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	httpAddr := freeAddr(t)
	const tok = "gateway-e2e-token"
	d := startDaemon(t, daemonOpts{
		args:   []string{"--http-listen", httpAddr},
		config: "api:\n  bearer_token_env: VERIFIERD_GW_TOKEN\n",
		env:    []string{"VERIFIERD_GW_TOKEN=" + tok},
	})
	effects, err := os.ReadFile(c.effects)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body, token string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+httpAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d, body is not JSON: %s", method, path, res.StatusCode, raw)
		}
		return res.StatusCode, out
	}
	begin := func(deployment map[string]any, patient, note string) (int, map[string]any) {
		t.Helper()
		req := map[string]any{"effects": string(effects), "params": map[string]string{"patient_id": patient, "note": note}}
		maps.Copy(req, deployment)
		body, _ := json.Marshal(req)
		return call("POST", "/v1/sessions", string(body), tok)
	}

	const patient, note = "patient-gw-1", "note-gw-1"
	code, b := begin(map[string]any{"deploymentName": d.register(t, c.deployment)}, patient, note)
	sid, _ := b["sessionId"].(string)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("Begin: %d %v\n%s", code, b, d.logs())
	}
	c.save(t, patient, note, 1)
	code, v := call("POST", "/v1/sessions/"+sid+":verify", "{}", tok)
	receipt, _ := v["receipt"].(map[string]any)
	if code != http.StatusOK || v["outcome"] != "VERIFIED" || receipt["payloadType"] != "application/vnd.verifierd.verdict-receipt.v1+json" {
		t.Fatalf("Verify: %d %v\n%s", code, v, d.logs())
	}
	code, s := call("GET", "/v1/sessions/"+sid, "", tok)
	if code != http.StatusOK {
		t.Errorf("GetSession: %d %v", code, s)
	}

	// Refusals: the gRPC code's HTTP status, the gRPC status as the body.
	inline := "effects:\n  kind: sql\n  sqlite_database: " + c.path + "\n"
	for _, tc := range []struct {
		name   string
		status int
		code   float64
		do     func() (int, map[string]any)
	}{
		{"inline deployment", http.StatusForbidden, 7, func() (int, map[string]any) {
			return begin(map[string]any{"deploymentYaml": inline}, "p2", "n2")
		}},
		{"unknown deployment", http.StatusBadRequest, 3, func() (int, map[string]any) {
			return begin(map[string]any{"deploymentName": "no-such-deployment"}, "p3", "n3")
		}},
		{"unknown session", http.StatusNotFound, 5, func() (int, map[string]any) {
			return call("POST", "/v1/sessions/no-such-session:verify", "{}", tok)
		}},
		{"no token", http.StatusUnauthorized, 0, func() (int, map[string]any) {
			return call("POST", "/v1/sessions/"+sid+":verify", "{}", "")
		}},
	} {
		code, body := tc.do()
		if code != tc.status {
			t.Errorf("%s: %d %v, want %d", tc.name, code, body, tc.status)
			continue
		}
		if tc.code == 0 {
			continue
		}
		if msg, _ := body["message"].(string); body["code"] != tc.code || msg == "" {
			t.Errorf("%s: body %v, want the gRPC status with code %v and a message", tc.name, body, tc.code)
		}
	}

	// The OpenAPI document: served, valid, and naming the routes used here.
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc openapi2.T
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatalf("/openapi.json: %d %v", res.StatusCode, err)
	}
	doc3, err := openapi2conv.ToV3(&doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc3.Validate(context.Background()); err != nil {
		t.Fatalf("/openapi.json does not validate: %v", err)
	}
	for path, method := range map[string]string{"/v1/sessions": "POST", "/v1/sessions/{sessionId}:verify": "POST", "/v1/sessions/{sessionId}": "GET"} {
		if doc.Paths[path] == nil || doc.Paths[path].GetOperation(method) == nil {
			t.Errorf("/openapi.json lacks %s %s", method, path)
		}
	}
}

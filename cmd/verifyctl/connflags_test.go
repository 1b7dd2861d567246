package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// answering is a VerifierService on a real gRPC listener on loopback that
// answers TestConnection and Begin from the deployment name it is sent and
// records the bearer token and run parameters each call carried, so the
// tests see what verifyctl put on the wire. The daemon's own answers are
// tested through the real daemon in e2e/.
type answering struct {
	verifierv1.UnimplementedVerifierServiceServer
	mu     sync.Mutex
	tokens []string
	params []map[string]string
}

func (a *answering) record(ctx context.Context, ps map[string]*structpb.Value) {
	params := map[string]string{}
	for k, v := range ps {
		params[k] = v.GetStringValue()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = append(a.tokens, strings.Join(md.Get("authorization"), ","))
	a.params = append(a.params, params)
}

func (a *answering) last() (string, map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokens[len(a.tokens)-1], a.params[len(a.params)-1]
}

func (a *answering) TestConnection(ctx context.Context, req *verifierv1.TestConnectionRequest) (*verifierv1.TestConnectionResponse, error) {
	a.record(ctx, req.GetParams())
	up := &verifierv1.CandidateConnection{CandidateIndex: 0, Kind: "sql", Tier: 1, Reachable: true, Message: "ok"}
	switch req.GetDeploymentName() {
	case "down":
		return &verifierv1.TestConnectionResponse{Candidates: []*verifierv1.CandidateConnection{up,
			{CandidateIndex: 1, Kind: "rest", Message: "dial tcp 127.0.0.1:9: connection refused"}}}, nil
	case "unconfigured":
		return &verifierv1.TestConnectionResponse{Candidates: []*verifierv1.CandidateConnection{
			{CandidateIndex: 0, Kind: "sql", Message: "environment variable PGPASSWORD is not set in the daemon's environment"}, up}}, nil
	}
	return &verifierv1.TestConnectionResponse{Candidates: []*verifierv1.CandidateConnection{up}}, nil
}

func (a *answering) Begin(ctx context.Context, req *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	a.record(ctx, req.GetParams())
	res := &verifierv1.BeginResponse{SessionId: "ses-1", Effects: []*verifierv1.BegunEffect{{ContractHash: "sha256:00", Tier: 1, Candidate: "sql"}}}
	if req.GetDeploymentName() == "extra" {
		res.UnusedParams = []string{"age", "tennant"}
	}
	return res, nil
}

func startAnswering(t *testing.T) (*answering, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	a := &answering{}
	verifierv1.RegisterVerifierServiceServer(srv, a)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return a, lis.Addr().String()
}

// effectsFile writes a one-contract effects file for begin.
func effectsFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "effects.yaml")
	if err := os.WriteFile(p, []byte("- {kind: record_written, match: {p: {param: p}}, count_new_only: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func ctlRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestPreflightExitCode: preflight prints every candidate's answer and
// exits 0 only when each one was configured and is reachable; otherwise 1,
// naming the ones that are not on stderr.
func TestPreflightExitCode(t *testing.T) {
	t.Parallel()
	_, addr := startAnswering(t)
	for _, tc := range []struct {
		deployment string
		code       int
		reachable  []bool
		stderr     string
	}{
		{"up", 0, []bool{true}, ""},
		{"down", 1, []bool{true, false}, "candidate 1 (rest): dial tcp 127.0.0.1:9: connection refused"},
		{"unconfigured", 1, []bool{false, true}, "candidate 0 (sql): environment variable PGPASSWORD is not set"},
	} {
		code, out, errOut := ctlRun("preflight", "--addr", addr, "--deployment-name", tc.deployment)
		if code != tc.code {
			t.Errorf("%s: exit %d (%s), want %d", tc.deployment, code, errOut, tc.code)
		}
		var cands []struct {
			Reachable bool `json:"reachable"`
		}
		if err := json.Unmarshal([]byte(out), &cands); err != nil {
			t.Fatalf("%s: stdout is not the JSON list: %v\n%s", tc.deployment, err, out)
		}
		var got []bool
		for _, c := range cands {
			got = append(got, c.Reachable)
		}
		if !slices.Equal(got, tc.reachable) {
			t.Errorf("%s: reachable %v, want %v", tc.deployment, got, tc.reachable)
		}
		if tc.stderr == "" && errOut != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%s: stderr %q, want it to name %q", tc.deployment, errOut, tc.stderr)
		}
	}
}

// TestConnectionFlagsBeforeTheCommand: the connection flags work before the
// command exactly as after it: the call reaches the --addr given, carries
// the --token-env token, and a flag repeated after the command wins.
func TestConnectionFlagsBeforeTheCommand(t *testing.T) {
	a, addr := startAnswering(t)
	t.Setenv("VERIFYCTL_FLAGS_TOKEN", "tok-before")
	for name, args := range map[string][]string{
		"before": {"--addr", addr, "--token-env", "VERIFYCTL_FLAGS_TOKEN", "--timeout", "20s", "preflight", "--deployment-name", "up", "--param", "p=1"},
		"after":  {"preflight", "--deployment-name", "up", "--param", "p=1", "--addr", addr, "--token-env=VERIFYCTL_FLAGS_TOKEN", "--timeout", "20s"},
		"mixed":  {"--token-env", "VERIFYCTL_FLAGS_TOKEN", "preflight", "--addr", addr, "--deployment-name", "up", "--param", "p=1"},
		// 127.0.0.1:9 is never dialled: the --addr after the command wins.
		"after wins": {"--addr", "127.0.0.1:9", "--token-env", "VERIFYCTL_FLAGS_TOKEN", "preflight", "--addr", addr, "--deployment-name", "up", "--param", "p=1"},
	} {
		code, out, errOut := ctlRun(args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s%s", name, code, out, errOut)
			continue
		}
		tok, ps := a.last()
		if tok != "Bearer tok-before" || ps["p"] != "1" {
			t.Errorf("%s: the daemon got token %q and params %v, want the --token-env token and p=1", name, tok, ps)
		}
	}

	// A command with a subcommand takes them after the subcommand.
	code, out, errOut := ctlRun("--addr", addr, "--token-env", "VERIFYCTL_FLAGS_TOKEN", "begin", "--deployment-name", "up", "--effects", effectsFile(t), "--param", "q=2")
	if code != 0 || !strings.Contains(out, `"session_id": "ses-1"`) {
		t.Fatalf("begin: exit %d: %s%s", code, out, errOut)
	}
	if tok, ps := a.last(); tok != "Bearer tok-before" || ps["q"] != "2" {
		t.Errorf("begin: the daemon got token %q and params %v", tok, ps)
	}
}

// TestLeadingClientFlagsPlacement: where the flags written before the
// command go, for every command shape, and what is refused.
func TestLeadingClientFlagsPlacement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"begin", "--addr", "x:1"}, []string{"begin", "--addr", "x:1"}},
		{[]string{"--addr", "x:1", "verify", "--session", "s"}, []string{"verify", "--addr=x:1", "--session", "s"}},
		{[]string{"--insecure", "--tls-ca", "ca.pem", "key"}, []string{"key", "--insecure=true", "--tls-ca=ca.pem"}},
		{[]string{"--addr=x:1", "episode", "register", "--episode", "e"}, []string{"episode", "register", "--addr=x:1", "--episode", "e"}},
		{[]string{"--addr", "x:1", "ledger", "export"}, []string{"ledger", "export", "--addr=x:1"}},
		{[]string{"--addr", "x:1", "artifact", "verify", "--file", "f"}, []string{"artifact", "verify", "--addr=x:1", "--file", "f"}},
		{[]string{"--timeout", "3s", "reward", "contracts"}, []string{"reward", "contracts", "--timeout=3s"}},
		{[]string{"--addr", "x:1", "run", "finish", "--run", "r"}, []string{"run", "finish", "--addr=x:1", "--run", "r"}},
		{[]string{"--addr", "x:1", "lint", "--workflow", "w"}, []string{"lint", "--addr=x:1", "--workflow", "w"}},
		{[]string{"-h"}, []string{"-h"}},
	} {
		var errOut bytes.Buffer
		got, ok := leadingClientFlags(tc.in, &errOut)
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q (%v, %s), want %q", tc.in, got, ok, errOut.String(), tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--deployment-name", "d", "preflight"}, "only the connection flags"},
		{[]string{"--addr", "x:1"}, "need a command after them"},
		{[]string{"--addr", "x:1", "judge", "--case", "c.json"}, "judge works without a daemon"},
		{[]string{"--addr", "x:1", "receipt", "verify"}, "receipt works without a daemon"},
		{[]string{"--addr", "x:1", "ledger", "verify", "--file", "l"}, "only ledger export talks to a daemon"},
	} {
		code, _, errOut := ctlRun(tc.args...)
		if code != exitInvalid || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errOut, tc.msg)
		}
	}
}

// TestUsageListsConnectionFlags: the usage names every connection flag and
// says they may stand before the command.
func TestUsageListsConnectionFlags(t *testing.T) {
	t.Parallel()
	code, out, _ := ctlRun("help")
	if code != 0 || !strings.Contains(out, "usage: verifyctl [connection flags] <command>") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	for _, f := range []string{"--addr HOST:PORT", "--token-env NAME", "--tls-ca FILE", "--timeout D", "--insecure"} {
		if !strings.Contains(out, f) {
			t.Errorf("usage does not list %s", f)
		}
	}
}

// TestBeginWarnsOfUnusedParams: the daemon's unused_params are in begin's
// JSON (an empty list when there are none) and warned of on stderr.
func TestBeginWarnsOfUnusedParams(t *testing.T) {
	t.Parallel()
	_, addr := startAnswering(t)
	for _, tc := range []struct {
		deployment string
		unused     []string
	}{{"up", []string{}}, {"extra", []string{"age", "tennant"}}} {
		code, out, errOut := ctlRun("begin", "--addr", addr, "--deployment-name", tc.deployment, "--effects", effectsFile(t), "--param", "age=36")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", tc.deployment, code, out, errOut)
		}
		var res struct {
			Unused []string `json:"unused_params"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Unused == nil || !slices.Equal(res.Unused, tc.unused) {
			t.Errorf("%s: unused_params %q (%v), want %q\n%s", tc.deployment, res.Unused, err, tc.unused, out)
		}
		warned := strings.Contains(errOut, "warning: no contract or candidate of the step uses --param age, tennant")
		if warned != (len(tc.unused) > 0) || (len(tc.unused) == 0 && errOut != "") {
			t.Errorf("%s: stderr %q", tc.deployment, errOut)
		}
	}
}

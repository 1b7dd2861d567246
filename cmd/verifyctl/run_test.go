package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// runAnswering is a VerifierService on a real gRPC listener on loopback
// that answers the run calls from the run id it is sent and records the
// requests, so the tests see what verifyctl put on the wire and how it
// prints and exits on each answer. The daemon's own run answers are tested
// through the real daemon in e2e/.
type runAnswering struct {
	verifierv1.UnimplementedVerifierServiceServer
	mu       sync.Mutex
	beginRun *verifierv1.BeginRunRequest
	begin    *verifierv1.BeginRequest
	artifact *verifierv1.VerifyArtifactRequest
	receipt  *structpb.Struct
}

func (a *runAnswering) BeginRun(_ context.Context, req *verifierv1.BeginRunRequest) (*verifierv1.BeginRunResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.beginRun = req
	if req.GetRunId() == "taken" {
		return nil, status.Error(codes.AlreadyExists, "run_id: run taken was begun with other arguments")
	}
	id := req.GetRunId()
	if id == "" {
		id = "run_1"
	}
	return &verifierv1.BeginRunResponse{RunId: id}, nil
}

func (a *runAnswering) Begin(_ context.Context, req *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.begin = req
	if req.GetStep() == "posting" {
		return nil, status.Error(codes.FailedPrecondition, "step posting needs step intake VERIFIED in run run_1 first (step_out_of_order)")
	}
	return &verifierv1.BeginResponse{SessionId: "ses-9", RegisteredStep: &verifierv1.RegisteredStep{Workflow: "w", Step: req.GetStep()}}, nil
}

func (a *runAnswering) VerifyArtifact(_ context.Context, req *verifierv1.VerifyArtifactRequest) (*verifierv1.VerifyArtifactResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.artifact = req
	return &verifierv1.VerifyArtifactResponse{Verdict: verifierv1.Verdict_CONFIRMED, Tier: 1}, nil
}

// run is the run of id: run_ok VERIFIED, run_rr RECONCILIATION_REQUIRED,
// run_open never sealed.
func (a *runAnswering) run(id string) (*verifierv1.Run, error) {
	r := &verifierv1.Run{RunId: id, Workflow: "w", DeploymentName: "d", State: verifierv1.RunState_sealed, Attempt: 1, Tier: 1, OracleRung: 2,
		Steps: []*verifierv1.RunStep{
			{Step: "intake", Consequential: true, SessionId: "ses-1", Outcome: verifierv1.Outcome_VERIFIED, Tier: 1, OracleRung: 2, ReceiptDigest: "sha256:aa"},
			{Step: "note", Consequential: false},
		},
		Artifacts: []*verifierv1.RunArtifact{{Artifact: "letter", FromStep: "intake", Verdict: verifierv1.Verdict_CONFIRMED, Sha256: "ab", Size: 3, ReceiptDigest: "sha256:bb"}},
		Outcome:   verifierv1.Outcome_VERIFIED}
	switch id {
	case "run_ok":
	case "run_rr":
		r.Outcome, r.Attempt = verifierv1.Outcome_RECONCILIATION_REQUIRED, 1
		r.Steps[0].Outcome = verifierv1.Outcome_RECONCILIATION_REQUIRED
		r.Reasons = []*verifierv1.Reason{{Code: "step_not_verified", Message: "step intake is RECONCILIATION_REQUIRED"}}
	case "run_open":
		r.State, r.Outcome, r.Attempt = verifierv1.RunState_open, verifierv1.Outcome_OUTCOME_UNSPECIFIED, 0
	default:
		return nil, status.Errorf(codes.NotFound, "no run %s", id)
	}
	return r, nil
}

func (a *runAnswering) FinishRun(_ context.Context, req *verifierv1.FinishRunRequest) (*verifierv1.FinishRunResponse, error) {
	r, err := a.run(req.GetRunId())
	if err != nil {
		return nil, err
	}
	return &verifierv1.FinishRunResponse{Run: r, Receipt: a.receipt}, nil
}

func (a *runAnswering) GetRun(_ context.Context, req *verifierv1.GetRunRequest) (*verifierv1.GetRunResponse, error) {
	r, err := a.run(req.GetRunId())
	if err != nil {
		return nil, err
	}
	res := &verifierv1.GetRunResponse{Run: r}
	if r.GetState() == verifierv1.RunState_sealed {
		res.Receipt = a.receipt
	}
	return res, nil
}

func (a *runAnswering) RollbackCheck(_ context.Context, req *verifierv1.RollbackCheckRequest) (*verifierv1.RollbackCheckResponse, error) {
	r, err := a.run(req.GetRunId())
	if err != nil {
		return nil, err
	}
	if req.GetRunId() == "run_ok" {
		r.Outcome = verifierv1.Outcome_ROLLED_BACK_VERIFIED
		return &verifierv1.RollbackCheckResponse{RolledBack: true, Run: r, Receipt: a.receipt}, nil
	}
	return &verifierv1.RollbackCheckResponse{Run: r, Remains: []*verifierv1.RollbackRemainder{
		{Step: "intake", SessionId: "ses-1", EffectIndex: 0, ContractHash: "sha256:cc", Reasons: []*verifierv1.Reason{{Code: "COUNT_OVER", Message: "1 new record remains"}}},
	}}, nil
}

// signedRunReceipt signs a run receipt payload for run id with a fresh key
// and returns the envelope as the daemon's Struct, its JSON and the key.
func signedRunReceipt(t *testing.T, id string) (*structpb.Struct, []byte, ed25519.PublicKey) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	payload, _ := json.Marshal(map[string]any{
		"run_id": id, "outcome": "VERIFIED", "attempt": 1,
		"signer": map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub), "key_id": receipt.KeyID(pub)},
	})
	env, _ := json.Marshal(receipt.Sign(priv, runReceiptType, payload))
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s, env, pub
}

func startRunAnswering(t *testing.T) (*runAnswering, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	a := &runAnswering{}
	a.receipt, _, _ = signedRunReceipt(t, "run_ok")
	verifierv1.RegisterVerifierServiceServer(srv, a)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return a, lis.Addr().String()
}

// TestRunCommands: run begin prints the run id and sends the workflow,
// deployment, params and the chosen id; begin --run sends only the run,
// the step and the step's params; run finish exits 0 only for VERIFIED and
// 4 otherwise, with the run as JSON either way; run show prints a run
// never sealed with a null outcome; run rollback-check exits 0 only when
// the run was rolled back; a refusal is the usual error JSON.
func TestRunCommands(t *testing.T) {
	t.Parallel()
	a, addr := startRunAnswering(t)

	code, out, errOut := ctlRun("run", "begin", "--addr", addr, "--workflow", "w", "--deployment-name", "d", "--param", "patient_id=p1", "--run-id", "r-7")
	if code != 0 || strings.TrimSpace(out) != "{\n  \"run_id\": \"r-7\"\n}" {
		t.Fatalf("run begin: exit %d %q %s", code, out, errOut)
	}
	if r := a.beginRun; r.GetWorkflow() != "w" || r.GetDeploymentName() != "d" || r.GetParams()["patient_id"].GetStringValue() != "p1" || r.GetRunId() != "r-7" {
		t.Errorf("run begin sent %v", r)
	}
	// Connection flags before the command land after the subcommand.
	if code, out, errOut = ctlRun("--addr", addr, "run", "begin", "--workflow", "w", "--deployment-name", "d"); code != 0 || !strings.Contains(out, `"run_id": "run_1"`) {
		t.Fatalf("run begin with leading --addr: exit %d %s %s", code, out, errOut)
	}
	if code, out, _ = ctlRun("run", "begin", "--addr", addr, "--workflow", "w", "--deployment-name", "d", "--run-id", "taken"); code != exitFailure || !strings.Contains(out, `"code": "AlreadyExists"`) {
		t.Errorf("run begin, the id taken with other arguments: exit %d %s", code, out)
	}

	code, out, errOut = ctlRun("begin", "--addr", addr, "--run", "run_1", "--step", "intake", "--param", "note=x")
	if code != 0 || !strings.Contains(out, `"session_id": "ses-9"`) {
		t.Fatalf("begin --run: exit %d %s %s", code, out, errOut)
	}
	if b := a.begin; b.GetRunId() != "run_1" || b.GetStep() != "intake" || b.GetWorkflow() != "" || b.GetDeployment() != nil || b.GetParams()["note"].GetStringValue() != "x" || len(b.GetParams()) != 1 {
		t.Errorf("begin --run sent %v", b)
	}
	if code, out, _ = ctlRun("begin", "--addr", addr, "--run", "run_1", "--step", "posting"); code != exitRefused || !strings.Contains(out, "step_out_of_order") {
		t.Errorf("begin --run of a step out of order: exit %d %s, want 3", code, out)
	}
	for _, args := range [][]string{
		{"begin", "--addr", addr, "--run", "run_1"},
		{"begin", "--addr", addr, "--run", "run_1", "--step", "s", "--deployment-name", "d"},
		{"begin", "--addr", addr, "--run", "run_1", "--step", "s", "--workflow", "w"},
		{"run", "begin", "--addr", addr, "--workflow", "w"},
		{"run", "finish", "--addr", addr},
		{"run", "nope"},
	} {
		if code, _, errOut := ctlRun(args...); code != exitInvalid || errOut == "" {
			t.Errorf("%q: exit %d (%s), want 2 with a message", args, code, errOut)
		}
	}

	// artifact verify --run records the check in the run.
	letter := filepath.Join(t.TempDir(), "letter.txt")
	if err := os.WriteFile(letter, []byte("Dear patient"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = ctlRun("artifact", "verify", "--addr", addr, "--deployment-name", "letters", "--file", letter, "--run", "run_1", "--artifact", "letter", "--step", "letter")
	if code != 0 || !strings.Contains(out, `"verdict": "CONFIRMED"`) {
		t.Fatalf("artifact verify --run: exit %d %s %s", code, out, errOut)
	}
	if r := a.artifact; r.GetRunId() != "run_1" || r.GetRunArtifact() != "letter" || r.GetStep() != "letter" || r.GetDeploymentName() != "letters" || r.GetArtifact().GetSize() != 12 {
		t.Errorf("artifact verify --run sent %v", r)
	}
	if code, _, errOut = ctlRun("artifact", "verify", "--addr", addr, "--deployment-name", "letters", "--file", letter, "--run", "run_1"); code != exitInvalid || !strings.Contains(errOut, "go together") {
		t.Errorf("artifact verify --run without --artifact/--step: exit %d %s", code, errOut)
	}

	type runOut struct {
		RunID   string  `json:"run_id"`
		State   string  `json:"state"`
		Outcome *string `json:"outcome"`
		Attempt int     `json:"attempt"`
		Steps   []struct {
			Step      string  `json:"step"`
			SessionID *string `json:"session_id"`
			Outcome   *string `json:"outcome"`
			Tier      int     `json:"tier"`
		} `json:"steps"`
		Artifacts []struct {
			Artifact string `json:"artifact"`
			Verdict  string `json:"verdict"`
			SHA256   string `json:"sha256"`
		} `json:"artifacts"`
		Reasons    []struct{ Code string } `json:"reasons"`
		Receipt    json.RawMessage         `json:"receipt"`
		RolledBack *bool                   `json:"rolled_back"`
		Remains    []struct {
			Step    string                  `json:"step"`
			Reasons []struct{ Code string } `json:"reasons"`
		} `json:"remains"`
	}
	rcpt := filepath.Join(t.TempDir(), "run-receipt.json")
	code, out, errOut = ctlRun("run", "finish", "--addr", addr, "--run", "run_ok", "--receipt-out", rcpt)
	if code != 0 {
		t.Fatalf("run finish VERIFIED: exit %d %s %s", code, out, errOut)
	}
	ok := mustRunJSON[runOut](t, out)
	if ok.RunID != "run_ok" || ok.State != "sealed" || ok.Outcome == nil || *ok.Outcome != "VERIFIED" || ok.Attempt != 1 ||
		len(ok.Steps) != 2 || ok.Steps[0].Outcome == nil || *ok.Steps[0].Outcome != "VERIFIED" || ok.Steps[1].SessionID != nil || ok.Steps[1].Outcome != nil ||
		len(ok.Artifacts) != 1 || ok.Artifacts[0].Verdict != "CONFIRMED" || len(ok.Reasons) != 0 || len(ok.Receipt) < 10 {
		t.Errorf("run finish VERIFIED printed %s", out)
	}
	if raw, err := os.ReadFile(rcpt); err != nil || !strings.Contains(string(raw), runReceiptType) {
		t.Errorf("--receipt-out: %v %s", err, raw)
	}

	code, out, _ = ctlRun("run", "finish", "--addr", addr, "--run", "run_rr")
	if rr := mustRunJSON[runOut](t, out); code != exitNotVerified || rr.Outcome == nil || *rr.Outcome != "RECONCILIATION_REQUIRED" || len(rr.Reasons) != 1 || rr.Reasons[0].Code != "step_not_verified" {
		t.Errorf("run finish RECONCILIATION_REQUIRED: exit %d %s, want 4 with the run", code, out)
	}
	if code, out, _ = ctlRun("run", "finish", "--addr", addr, "--run", "gone"); code != exitFailure || !strings.Contains(out, `"code": "NotFound"`) {
		t.Errorf("run finish of an unknown run: exit %d %s", code, out)
	}

	code, out, _ = ctlRun("run", "show", "--addr", addr, "--run", "run_open")
	if open := mustRunJSON[runOut](t, out); code != 0 || open.State != "open" || open.Outcome != nil || string(open.Receipt) != "null" {
		t.Errorf("run show of an open run: exit %d %s", code, out)
	}

	code, out, _ = ctlRun("run", "rollback-check", "--addr", addr, "--run", "run_ok")
	if rb := mustRunJSON[runOut](t, out); code != 0 || rb.RolledBack == nil || !*rb.RolledBack || *rb.Outcome != "ROLLED_BACK_VERIFIED" || rb.Remains == nil || len(rb.Remains) != 0 {
		t.Errorf("rollback-check, all undone: exit %d %s", code, out)
	}
	code, out, _ = ctlRun("run", "rollback-check", "--addr", addr, "--run", "run_rr")
	if rb := mustRunJSON[runOut](t, out); code != exitNotVerified || rb.RolledBack == nil || *rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Step != "intake" || rb.Remains[0].Reasons[0].Code != "COUNT_OVER" {
		t.Errorf("rollback-check, a change remains: exit %d %s, want 4 listing it", code, out)
	}
}

func mustRunJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// TestReceiptVerifyRun: a run receipt verifies offline; --expect-run binds
// it to its run; a verdict receipt is not a run receipt.
func TestReceiptVerifyRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, env, pub := signedRunReceipt(t, "run_ok")
	rc := filepath.Join(dir, "run.json")
	key := filepath.Join(dir, "key.json")
	// What `run finish` prints, with the envelope under "receipt".
	wrapped := filepath.Join(dir, "finish.json")
	for p, data := range map[string][]byte{
		rc:      env,
		key:     []byte(`{"public_key": "` + base64.StdEncoding.EncodeToString(pub) + `"}`),
		wrapped: []byte(`{"run_id": "run_ok", "outcome": "VERIFIED", "receipt": ` + string(env) + `}`),
	} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runCtl(t, "receipt", "verify", "--receipt", rc, "--public-key", key, "--expect-run", "run_ok")
	if code != 0 || out["valid"] != true || out["payload_type"] != runReceiptType || out["payload"].(map[string]any)["run_id"] != "run_ok" {
		t.Fatalf("run receipt, --expect-run its run: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", wrapped, "--key-id", receipt.KeyID(pub)); code != 0 || out["valid"] != true {
		t.Fatalf("run receipt from run finish output, by key id: exit %d %v", code, out)
	}
	out, code = runCtl(t, "receipt", "verify", "--receipt", rc, "--public-key", key, "--expect-run", "run_other")
	mm, _ := out["mismatch"].(map[string]any)
	if code != 1 || out["valid"] != false || out["signature_valid"] != true || mm["field"] != "run" || mm["path"] != "run_id" || mm["found"] != "run_ok" {
		t.Errorf("another run: exit %d %v", code, out)
	}

	// A verdict receipt, however valid, is no run receipt.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	vpub := priv.Public().(ed25519.PublicKey)
	payload, _ := json.Marshal(map[string]any{"session_id": "ses-1", "run_id": "run_ok", "outcome": "VERIFIED"})
	venv, _ := json.Marshal(receipt.Sign(priv, receipt.PayloadTypeVerdict, payload))
	vrc := filepath.Join(dir, "verdict.json")
	vkey := filepath.Join(dir, "vkey.pub")
	if err := os.WriteFile(vrc, venv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vkey, []byte(base64.StdEncoding.EncodeToString(vpub)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runCtl(t, "receipt", "verify", "--receipt", vrc, "--public-key", vkey, "--expect-run", "run_ok")
	if mm, _ := out["mismatch"].(map[string]any); code != 1 || mm["path"] != "payloadType" || mm["found"] != receipt.PayloadTypeVerdict {
		t.Errorf("a verdict receipt under --expect-run: exit %d %v", code, out)
	}
	// A run receipt with no run_id is refused even without --expect-run.
	_, priv2, _ := ed25519.GenerateKey(rand.Reader)
	bad, _ := json.Marshal(receipt.Sign(priv2, runReceiptType, []byte(`{"outcome": "VERIFIED"}`)))
	badrc := filepath.Join(dir, "bad.json")
	badkey := filepath.Join(dir, "bad.pub")
	_ = os.WriteFile(badrc, bad, 0o600)
	_ = os.WriteFile(badkey, []byte(base64.StdEncoding.EncodeToString(priv2.Public().(ed25519.PublicKey))), 0o600)
	if out, code = runCtl(t, "receipt", "verify", "--receipt", badrc, "--public-key", badkey); code != 1 || !strings.Contains(out["reason"].(string), "run_id") {
		t.Errorf("a run receipt without run_id: exit %d %v", code, out)
	}
}

// Package e2e tests verifierd end to end with its real binaries: the daemon,
// verifyctl, the first-party adapters as plugin subprocesses, a customer-style
// plugin, and a real SQLite system of record written by the demo's clinic
// program. Daemons listen on 127.0.0.1 and are stopped by their own PID.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/verifierd/verifierd/internal/builtin"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// bins holds the binaries built once in TestMain.
var bins struct {
	dir       string // verifierd, verifyctl, built-in adapters, clinic
	pluginDir string // customer plugins: csv-ledger, slow, tier3-sql
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "verifierd-e2e")
	if err != nil {
		panic(err)
	}
	bins.dir = filepath.Join(dir, "bin")
	bins.pluginDir = filepath.Join(dir, "plugins")
	builds := [][2]string{
		{filepath.Join(bins.dir, "verifierd"), "../cmd/verifierd"},
		{filepath.Join(bins.dir, "verifyctl"), "../cmd/verifyctl"},
		{filepath.Join(bins.dir, "clinic"), "../examples/demo/clinic"},
		{filepath.Join(bins.pluginDir, "verifier-adapter-csv-ledger"), "../examples/csv-ledger"},
		{filepath.Join(bins.pluginDir, "verifier-adapter-slow"), "./testdata/slowadapter"},
		{filepath.Join(bins.pluginDir, "verifier-adapter-tier3-sql"), "./testdata/tier3sql"},
	}
	for _, a := range builtin.Adapters {
		builds = append(builds, [2]string{filepath.Join(bins.dir, a.Binary()), "." + a.Package()})
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", b[1], err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running verifierd.
type daemon struct {
	addr    string
	dataDir string
	args    []string
	env     []string
	// dir is the daemon's working directory (the test's own when empty).
	dir    string
	cmd    *exec.Cmd
	logMu  sync.Mutex
	log    bytes.Buffer
	exited chan struct{}

	// slots are the registered deployments the harness writes (register).
	slotMu   sync.Mutex
	slotDir  string
	slots    map[string]string // deployment file -> registered name
	nextSlot int
}

// deploymentSlots is how many deployments a test daemon registers.
const deploymentSlots = 32

type daemonOpts struct {
	pluginDir string
	config    string // daemon config YAML, written to a file when set
	env       []string
	dataDir   string
	args      []string
	// inline starts the daemon with --allow-inline-deployments.
	inline bool
}

func freeAddr(t testing.TB) string {
	t.Helper()
	// A port is free only until someone binds it; the kernel may hand a
	// just-released port out again, so two calls (a daemon's gRPC and HTTP
	// listeners) could get the same one. No address is given out twice
	// by this process.
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no loopback port not handed out before")
	return ""
}

// handedOut is every address freeAddr gave out.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// register makes the deployment file a registered deployment of the daemon
// and returns its name: a copy in one of the daemon config's slots (the same
// file keeps its slot, with its current content).
func (d *daemon) register(t testing.TB, deployment string) string {
	t.Helper()
	raw, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}
	d.slotMu.Lock()
	defer d.slotMu.Unlock()
	if d.slots == nil {
		t.Fatal("this daemon's config has its own deployments: section; name one of those")
	}
	name, ok := d.slots[deployment]
	if !ok {
		if d.nextSlot == deploymentSlots {
			t.Fatalf("all %d deployment slots are taken", deploymentSlots)
		}
		name = fmt.Sprintf("dep%d", d.nextSlot)
		d.nextSlot++
		d.slots[deployment] = name
	}
	if err := os.WriteFile(filepath.Join(d.slotDir, name+".yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// startDaemon starts verifierd and waits until it answers.
func startDaemon(t testing.TB, o daemonOpts) *daemon {
	t.Helper()
	d := &daemon{addr: freeAddr(t), dataDir: o.dataDir, env: o.env}
	if d.dataDir == "" {
		d.dataDir = filepath.Join(t.TempDir(), "data")
	}
	// The HTTP listener is off unless a test passes its own --http-listen
	// (a later flag wins): the default port would collide between daemons.
	d.args = []string{"--listen", d.addr, "--http-listen", "", "--data-dir", d.dataDir, "--log-level", "debug"}
	if o.pluginDir != "" {
		d.args = append(d.args, "--plugin-dir", o.pluginDir)
	}
	if o.inline {
		d.args = append(d.args, "--allow-inline-deployments")
	}
	d.args = append(d.args, o.args...)
	// The harness plays the operator: unless the test writes its own
	// deployments: section, the daemon config registers slot names whose
	// files register writes when a test names a deployment (the daemon
	// reads a registered file at each Begin).
	cfg := o.config
	// Most tests send their own effects (--effects), which the daemon
	// refuses unless the operator turns require_registered_contracts off:
	// the harness does so unless the test writes its own policy: block.
	if !hasTopLevelKey(cfg, "policy") {
		cfg = "policy: {require_registered_contracts: false}\n" + cfg
	}
	if !strings.Contains(cfg, "deployments:") {
		d.slotDir = t.TempDir()
		d.slots = map[string]string{}
		cfg += "deployments:\n"
		for i := range deploymentSlots {
			cfg += fmt.Sprintf("  dep%d: %s\n", i, filepath.Join(d.slotDir, fmt.Sprintf("dep%d.yaml", i)))
		}
	}
	p := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.args = append(d.args, "--config", p)
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

// hasTopLevelKey reports whether the YAML document cfg sets key at its top
// level.
func hasTopLevelKey(cfg, key string) bool {
	for line := range strings.Lines(cfg) {
		if strings.HasPrefix(line, key+":") {
			return true
		}
	}
	return false
}

func (d *daemon) start() error {
	d.cmd = exec.Command(filepath.Join(bins.dir, "verifierd"), d.args...)
	d.cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, d.env...)
	d.cmd.Dir = d.dir
	d.cmd.Stdout = &lockedWriter{mu: &d.logMu, w: &d.log}
	d.cmd.Stderr = &lockedWriter{mu: &d.logMu, w: &d.log}
	if err := d.cmd.Start(); err != nil {
		return err
	}
	d.exited = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("verifierd exited at start:\n%s", d.logs())
		default:
		}
		if c, err := net.DialTimeout("tcp", d.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("verifierd did not listen on %s:\n%s", d.addr, d.logs())
}

// stop sends SIGTERM to the daemon's own PID and waits.
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// kill9 kills the daemon abruptly, as a crash would.
func (d *daemon) kill9() {
	d.cmd.Process.Kill()
	<-d.exited
}

func (d *daemon) logs() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ctl runs verifyctl against the daemon and returns stdout and the exit code.
func (d *daemon) ctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	args = append(args, "--addr", d.addr)
	cmd := exec.Command(filepath.Join(bins.dir, "verifyctl"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("verifyctl %v: %v", args, err)
	}
	if stderr.Len() > 0 {
		t.Logf("verifyctl %s stderr: %s", args[0], stderr.String())
	}
	return stdout.String(), code
}

func (d *daemon) client(t testing.TB) verifierv1.VerifierServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return verifierv1.NewVerifierServiceClient(conn)
}

// clinicDB is a real SQLite system of record with its deployment and effects.
type clinicDB struct {
	path       string
	deployment string
	effects    string
}

func newClinic(t *testing.T) *clinicDB {
	t.Helper()
	dir := t.TempDir()
	c := &clinicDB{path: filepath.Join(dir, "clinic.db")}
	c.run(t, "init", c.path)
	c.deployment = writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
`, c.path))
	c.effects = writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: note
  value: {param: note}
  timeout_s: 0.5
`)
	return c
}

func (c *clinicDB) run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bins.dir, "clinic"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("clinic %v: %v\n%s", args, err, out)
	}
}

func (c *clinicDB) save(t *testing.T, patient, note string, times int) {
	t.Helper()
	c.run(t, "save", c.path, patient, "Triage", note, fmt.Sprint(times))
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// verifyOutput is the JSON verifyctl verify prints.
type verifyOutput struct {
	Outcome         string `json:"outcome"`
	TerminalOutcome string `json:"terminal_outcome"`
	Effects         []struct {
		Verdict       string `json:"verdict"`
		Result        string `json:"result"`
		ObservedCount *int   `json:"observed_count"`
		Reasons       []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"reasons"`
		Tier               int             `json:"tier"`
		OracleRung         int             `json:"oracle_rung"`
		Substrate          string          `json:"substrate"`
		ContractHash       string          `json:"contract_hash"`
		ReconciliationTask json.RawMessage `json:"reconciliation_task"`
		Newness            string          `json:"newness"`
		CensusScope        string          `json:"census_scope"`
		CollateralScope    string          `json:"collateral_scope"`
	} `json:"effects"`
	Receipt json.RawMessage `json:"receipt"`
}

func (v verifyOutput) summary() string {
	var parts []string
	for _, e := range v.Effects {
		var codes []string
		for _, r := range e.Reasons {
			codes = append(codes, r.Code)
		}
		parts = append(parts, fmt.Sprintf("%s/%s/%s", e.Verdict, e.Result, strings.Join(codes, "+")))
	}
	return v.Outcome + " " + strings.Join(parts, " ")
}

func mustJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

type beginOutput struct {
	SessionID string `json:"session_id"`
	Effects   []struct {
		ContractHash string `json:"contract_hash"`
		Tier         int    `json:"tier"`
		Candidate    string `json:"candidate"`
	} `json:"effects"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Path    string `json:"path"`
	} `json:"error"`
}

func (d *daemon) begin(t *testing.T, c *clinicDB, patient, note string) beginOutput {
	t.Helper()
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, c.deployment), "--effects", c.effects, "--param", "patient_id="+patient, "--param", "note="+note)
	if code != 0 {
		t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	return mustJSON[beginOutput](t, out)
}

func (d *daemon) verify(t *testing.T, id string) verifyOutput {
	t.Helper()
	out, code := d.ctl(t, "verify", "--session", id)
	if code != 0 {
		t.Fatalf("verify exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	v := mustJSON[verifyOutput](t, out)
	checkRungs(t, v)
	return v
}

// TestSaveOutcomes: begin -> the automation writes (or not) -> verify.
func TestSaveOutcomes(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	tests := []struct {
		name    string
		act     func(patient string)
		want    string
		task    bool
		observe int
	}{
		{"write confirmed", func(p string) { c.save(t, p, "Follow-up", 1) },
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL", false, 1},
		{"double submit is conflicting", func(p string) { c.save(t, p, "Follow-up", 2) },
			"RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS", true, 2},
		{"missing write is refuted", func(string) {},
			"HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH", true, 0},
		{"wrong note is conflicting", func(p string) { c.save(t, p, "Follow up", 1) },
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH", false, 1},
		// Something landed in the collection (the census saw a new
		// identity): not the proven absence HALTED_BEFORE_EFFECT needs.
		{"write for another patient", func(p string) { c.save(t, p+"-other", "Follow-up", 1) },
			"RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER+UNEXPLAINED_CHANGE REFUTED/refuted/FIELD_NO_MATCH", true, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patient := fmt.Sprintf("p%d", i)
			b := d.begin(t, c, patient, "Follow-up")
			if len(b.Effects) != 2 || b.Effects[0].Tier != 1 || b.Effects[0].Candidate != "sql" || !strings.HasPrefix(b.Effects[0].ContractHash, "sha256:") {
				t.Fatalf("begin effects: %+v", b.Effects)
			}
			tt.act(patient)
			v := d.verify(t, b.SessionID)
			if got := v.summary(); got != tt.want {
				t.Errorf("verify = %s\nwant     %s", got, tt.want)
			}
			if n := v.Effects[0].ObservedCount; n == nil || *n != tt.observe {
				t.Errorf("observed_count = %v, want %d", n, tt.observe)
			}
			if v.Effects[0].Tier != 1 || v.Effects[0].Substrate != "sql" {
				t.Errorf("tier/substrate = %d/%s, want 1/sql", v.Effects[0].Tier, v.Effects[0].Substrate)
			}
			hasTask := string(v.Effects[0].ReconciliationTask) != "null"
			if hasTask != tt.task {
				t.Errorf("reconciliation task present = %v, want %v: %s", hasTask, tt.task, v.Effects[0].ReconciliationTask)
			}
			// Nothing landed: a slow save may still land, so the task
			// asks for a re-verification before any retry.
			if v.Outcome == "HALTED_BEFORE_EFFECT" {
				for i, e := range v.Effects {
					var task struct {
						SuggestedAction string `json:"suggested_action"`
					}
					if err := json.Unmarshal(e.ReconciliationTask, &task); err != nil || task.SuggestedAction != "REVERIFY_BEFORE_RETRY" {
						t.Errorf("effect %d task %s, want one suggesting REVERIFY_BEFORE_RETRY", i, e.ReconciliationTask)
					}
				}
			}
			// A finished session answers its recorded result again.
			again := d.verify(t, b.SessionID)
			if again.summary() != v.summary() {
				t.Errorf("second verify = %s, want the recorded %s", again.summary(), v.summary())
			}
		})
	}
}

// TestRefusals: invalid input exits 2 with the path; an unreadable baseline
// refuses the session with exit 3 (do not actuate).
func TestRefusals(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	dir := t.TempDir()

	badEffects := writeFile(t, dir, "bad.yaml", "- kind: record_written\n  match: {id: 1}\n")
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, c.deployment), "--effects", badEffects, "--param", "patient_id=p1")
	if r := mustJSON[beginOutput](t, out); code != 2 || r.Error == nil || r.Error.Path != "effects[0].match.id" {
		t.Errorf("int literal: exit %d, %s; want exit 2 naming effects[0].match.id", code, out)
	}
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, c.deployment), "--effects", c.effects, "--param", "patient_id=p1")
	if r := mustJSON[beginOutput](t, out); code != 2 || r.Error == nil || !strings.Contains(r.Error.Message, `"note"`) {
		t.Errorf("missing param: exit %d, %s; want exit 2 naming note", code, out)
	}

	broken := writeFile(t, dir, "broken.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id FROM no_such_table
`, c.path))
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, broken), "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
	r := mustJSON[beginOutput](t, out)
	if code != 3 || r.Error == nil || r.Error.Code != "FailedPrecondition" || !strings.Contains(r.Error.Message, "do not actuate") {
		t.Errorf("unreadable baseline: exit %d, %s; want exit 3, FailedPrecondition, do not actuate", code, out)
	}

	writer := writeFile(t, dir, "writer.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: DELETE FROM encounters
`, c.path))
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, writer), "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
	if r := mustJSON[beginOutput](t, out); code != 2 || r.Error == nil || !strings.Contains(r.Error.Message, "DELETE") {
		t.Errorf("writing query: exit %d, %s; want exit 2 naming DELETE", code, out)
	}
}

// TestDaemonKilledBetweenBeginAndVerify: kill -9 after Begin, restart on the
// same data dir, and Verify still answers from the persisted baseline.
func TestDaemonKilledBetweenBeginAndVerify(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	c.save(t, "p1", "earlier visit", 1) // a pre-existing row the baseline must remember
	b := d.begin(t, c, "p1", "Follow-up")
	d.kill9()
	c.save(t, "p1", "Follow-up", 1)
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	v := d.verify(t, b.SessionID)
	// count_new_only only works if the baseline survived: the earlier row
	// matches the selector too.
	want := "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_AMBIGUOUS"
	if got := v.summary(); got != want {
		t.Errorf("verify after restart = %s\nwant %s", got, want)
	}
}

func childPIDs(t testing.TB, parent int, name string) []int {
	t.Helper()
	out, _ := exec.Command("pgrep", "-P", fmt.Sprint(parent), "-f", name).Output()
	var pids []int
	for f := range strings.FieldsSeq(string(out)) {
		var p int
		if _, err := fmt.Sscan(f, &p); err != nil {
			continue
		}
		pids = append(pids, p)
	}
	return pids
}

// TestPluginKilledMidCapture: the adapter process dies during the after read;
// the verdict is INDETERMINATE/unavailable, and the next session works.
func TestPluginKilledMidCapture(t *testing.T) {
	// The contract counts all 3000 rows, claiming no change: the test is
	// about the adapter dying, so the operator's policy allows that.
	d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: noChangeClaim})
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	dep := writeFile(t, dir, "slow.yaml", fmt.Sprintf("effects:\n  kind: slow\n  options: {records: 3000, delay_ms: 5000, marker: %s}\n", marker))
	effects := writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {kind: row}, expected_count: 3000, forbid_collateral_loss: false, timeout_s: 0}\n")

	begin := func() string {
		out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects)
		if code != 0 {
			t.Fatalf("begin exit %d: %s\n%s", code, out, d.logs())
		}
		return mustJSON[beginOutput](t, out).SessionID
	}
	id := begin()
	done := make(chan verifyOutput)
	go func() { done <- d.verify(t, id) }()
	deadline := time.Now().Add(10 * time.Second)
	var killed int
	for {
		if raw, err := os.ReadFile(marker); err == nil && len(raw) > 0 {
			if _, err := fmt.Sscan(string(raw), &killed); err != nil {
				killed = 0
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the after read never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Contains(childPIDs(t, d.cmd.Process.Pid, "verifier-adapter-slow"), killed) {
		t.Fatalf("the adapter serving the read (pid %d) is not a child of the daemon", killed)
	}
	syscall.Kill(killed, syscall.SIGKILL)
	v := <-done
	if got, want := v.summary(), "RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE"; got != want {
		t.Errorf("verify = %s, want %s", got, want)
	}
	// The adapter process failed, not the system of record: the verdict
	// stays INDETERMINATE, and the ledger's terminal outcome says so.
	if v.TerminalOutcome != "FAILED_PLATFORM" {
		t.Errorf("terminal_outcome = %q, want FAILED_PLATFORM", v.TerminalOutcome)
	}

	// The next call relaunches the same configured adapter; the marker now
	// exists, so its read runs straight through.
	id = begin()
	if pids := childPIDs(t, d.cmd.Process.Pid, "verifier-adapter-slow"); len(pids) == 0 || slices.Contains(pids, killed) {
		t.Errorf("adapter processes after relaunch: %v (killed %d)", pids, killed)
	}
	if got, want := d.verify(t, id).summary(), "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"; got != want {
		t.Errorf("after relaunch: verify = %s, want %s", got, want)
	}
}

// noChangeClaim is the daemon policy of tests whose contracts only count
// the records there (no count_new_only): they are about something else.
const noChangeClaim = "policy: {require_change_claim: false, require_registered_contracts: false}\n"

// TestPluginPinsAndNames: a wrong SHA-256 pin refuses the plugin; a plugin
// named like a built-in kind stops the daemon from starting.
func TestPluginPinsAndNames(t *testing.T) {
	ledger := filepath.Join(bins.pluginDir, "verifier-adapter-csv-ledger")
	raw, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	dir := t.TempDir()
	csvPath := writeFile(t, dir, "ledger.csv", "id,account,amount\n1,acme,10.50\n")
	dep := writeFile(t, dir, "ledger.yaml", fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %s, id_column: id}\n", csvPath))
	effects := writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {account: acme}, forbid_collateral_loss: false}\n")

	t.Run("right pin runs", func(t *testing.T) {
		d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: noChangeClaim + fmt.Sprintf("plugins:\n  csv-ledger: {sha256: %s}\n", hex.EncodeToString(sum[:]))})
		out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects)
		if code != 0 {
			t.Fatalf("begin exit %d: %s", code, out)
		}
		if got := d.verify(t, mustJSON[beginOutput](t, out).SessionID).summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
			t.Errorf("verify = %s", got)
		}
	})
	t.Run("wrong pin refused", func(t *testing.T) {
		d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: noChangeClaim + fmt.Sprintf("plugins:\n  csv-ledger: {sha256: %q}\n", strings.Repeat("0", 64))})
		out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects)
		if r := mustJSON[beginOutput](t, out); code != 3 || r.Error == nil || !strings.Contains(r.Error.Message, "pinned SHA-256") {
			t.Errorf("wrong pin: exit %d, %s; want exit 3 naming the pin", code, out)
		}
	})
	t.Run("built-in name refused", func(t *testing.T) {
		pdir := t.TempDir()
		if err := os.WriteFile(filepath.Join(pdir, "verifier-adapter-sql"), raw, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bins.dir, "verifierd"), "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--plugin-dir", pdir)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "shadow a built-in kind") {
			t.Errorf("daemon with a plugin named sql: err %v, output %s; want a refusal", err, out)
		}
	})
}

// TestSecretsNeverLeak: a secret given to a plugin never shows in the
// daemon's logs or in any response.
func TestSecretsNeverLeak(t *testing.T) {
	secret := fmt.Sprintf("s3cr3t-%d-value", time.Now().UnixNano())
	dir := t.TempDir()
	csvPath := writeFile(t, dir, "ledger.csv", "id,account,amount\n1,acme,10.50\n")
	dep := writeFile(t, dir, "ledger.yaml", fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %s, id_column: id}\n  secret_env: {password: LEDGER_PASSWORD}\n", csvPath))
	effects := writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {account: acme}, forbid_collateral_loss: false}\n")
	d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: noChangeClaim + "secrets:\n  allow: [LEDGER_*]\n", env: []string{"LEDGER_PASSWORD=" + secret}})

	var responses []string
	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, dep))
	responses = append(responses, out)
	if code != 0 {
		t.Fatalf("preflight exit %d: %s", code, out)
	}
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects)
	responses = append(responses, out)
	if code != 0 {
		t.Fatalf("begin exit %d: %s", code, out)
	}
	id := mustJSON[beginOutput](t, out).SessionID
	out, _ = d.ctl(t, "verify", "--session", id)
	responses = append(responses, out)
	out, _ = d.ctl(t, "session", "--session", id)
	responses = append(responses, out)
	if got := mustJSON[verifyOutput](t, responses[2]).summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("verify = %s", got)
	}

	// A deployment naming a variable the daemon does not allow is refused.
	denied := writeFile(t, dir, "denied.yaml", fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %s}\n  secret_env: {password: HOME}\n", csvPath))
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, denied), "--effects", effects)
	responses = append(responses, out)
	if code != 3 || !strings.Contains(out, "secrets.allow") {
		t.Errorf("disallowed variable: exit %d %s; want exit 3 pointing at secrets.allow", code, out)
	}
	// A credential written as an option is refused however deep it sits,
	// by its path, and its value is never echoed.
	nested := writeFile(t, dir, "nested.yaml", fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %s, conn: {auth: [{user: u, token: %s}]}}\n", csvPath, secret))
	out, code = d.ctl(t, "begin", "--deployment-name", d.register(t, nested), "--effects", effects)
	responses = append(responses, out)
	if code != 2 || !strings.Contains(out, `"path": "deployment.effects.options.conn.auth[0].token"`) {
		t.Errorf("nested credential option: exit %d %s; want exit 2 (invalid) naming effects.options.conn.auth[0].token", code, out)
	}
	d.stop()
	for i, r := range responses {
		if strings.Contains(r, secret) {
			t.Errorf("response %d carries the secret: %s", i, r)
		}
	}
	if logs := d.logs(); strings.Contains(logs, secret) {
		t.Errorf("the daemon log carries the secret")
	} else if !strings.Contains(logs, "session verified") {
		t.Errorf("the daemon log is not the one expected (no 'session verified'): %s", logs)
	}
	dbFile, err := os.ReadFile(filepath.Join(d.dataDir, "verifierd.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(dbFile, []byte(secret)) {
		t.Error("the store file carries the secret")
	}
}

// TestJudgeRPC: the pure judge over client-supplied reads.
func TestJudgeRPC(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	res, err := d.client(t).Judge(context.Background(), &verifierv1.JudgeRequest{
		Effects: `[{"kind": "record_written", "match": {"patient_id": "p1"}}]`,
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true, Records: structRecords(t, [][]byte{[]byte(`{"id": 1, "patient_id": "p1"}`), []byte(`{"id": 2, "patient_id": "p1"}`)})},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := res.GetEffects()[0]
	if e.GetVerdict() != verifierv1.Verdict_REFUTED || e.GetResult() != verifierv1.ResultClass_conflicting || e.GetObservedCount() != 2 {
		t.Errorf("judge = %v %v %d", e.GetVerdict(), e.GetResult(), e.GetObservedCount())
	}
}

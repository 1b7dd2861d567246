//go:build linux

// Package imagetest runs the images `make image` built as the Kubernetes
// manifests run them: two verifierd containers on one PostgreSQL store,
// with the args, environment and config of deploy/kubernetes, as uid 65532
// on a read-only root filesystem. `make image-test` (scripts/image-test.sh)
// runs it with VERIFIERD_IMAGE set; without it every test skips.
package imagetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// manifests is deploy/kubernetes, from this package.
const manifests = "../kubernetes"

// env is what make image-test passes.
type env struct {
	full, slim string // the two image tags
	ctl        string // the host's verifyctl, built with the images
	run        string // the label value marking this run's containers
}

func setup(t *testing.T) env {
	t.Helper()
	e := env{full: os.Getenv("VERIFIERD_IMAGE"), slim: os.Getenv("VERIFIERD_IMAGE_SLIM"), ctl: os.Getenv("VERIFIERD_IMAGE_VERIFYCTL"), run: os.Getenv("VERIFIERD_IMAGE_TEST_RUN")}
	if e.full == "" {
		t.Skip("VERIFIERD_IMAGE is unset: make image-test builds the images and runs this test")
	}
	if e.slim == "" || e.ctl == "" || e.run == "" {
		t.Fatal("VERIFIERD_IMAGE_SLIM, VERIFIERD_IMAGE_VERIFYCTL and VERIFIERD_IMAGE_TEST_RUN must be set with VERIFIERD_IMAGE (scripts/image-test.sh sets them)")
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		t.Fatal("CONTAINERS_CONF is unset: podman runs here with deploy/containers.conf (scripts/image-test.sh sets it)")
	}
	return e
}

// podman runs podman and returns its stdout.
func podman(args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %v\n%s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func b64Key(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// manifest is the part of deploy/kubernetes the test runs from.
type manifest struct {
	Kind string            `yaml:"kind"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name string `yaml:"name"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readManifest(t *testing.T, file string) manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifests, file))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// fleet is what the replicas share: the store, the keys and secrets (by
// environment, as the Deployment's secretKeyRefs), the config and TLS
// folders (as the ConfigMap and the TLS Secret are mounted).
type fleet struct {
	e         env
	pg        *sqlservers.Postgres
	args      []string          // the Deployment's args, $(VAR) expanded
	secretEnv map[string]string // every env var the Deployment sets
	// configFiles are the ConfigMap's files; configDirs the folder
	// mounted as the ConfigMap for each image.
	configFiles map[string]string
	configDirs  map[string]string
	extraConfig func(daemon map[string]any, dir string)
	parent      string
	tlsDir      string
	caPool      *x509.CertPool
	caFile      string
}

// replica is one running container.
type replica struct {
	name               string
	grpc, http, health string
	dataDir            string
	image              string
	args               []string
	configDir          string
}

// newFleet starts PostgreSQL and lays out the shared config, TLS and keys.
func newFleet(t *testing.T, e env, extraConfig func(daemon map[string]any, dir string)) *fleet {
	t.Helper()
	parent, err := os.MkdirTemp("", "imagetest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil { // the servers and containers run as their own users
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if err != nil {
		log := ""
		if pg != nil {
			log = pg.Log()
		}
		t.Fatalf("PostgreSQL could not start: %v\n%s", err, log)
	}
	f := &fleet{e: e, pg: pg}
	ctx := context.Background()
	// The system of record of the ConfigMap's clinic deployment.
	if err := pg.Exec(ctx, pg.Database,
		`CREATE TABLE encounters (id serial PRIMARY KEY, patient_id text NOT NULL, type text NOT NULL, note text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
		`GRANT SELECT ON encounters TO `+pg.Reader.User); err != nil {
		t.Fatal(err)
	}

	// The ConfigMap's files, the clinic's connection pointed at this
	// PostgreSQL on loopback; each image's replicas get them with that
	// image's pins (configFor).
	cm := readManifest(t, "configmap.yaml")
	f.configFiles = map[string]string{}
	f.parent = parent
	connect := regexp.MustCompile(`(?m)^(\s*)sql_connect_args: .*$`)
	for name, content := range cm.Data {
		if name == "clinic.yaml" {
			if !connect.MatchString(content) {
				t.Fatal("configmap.yaml's clinic.yaml has no sql_connect_args line to point at the test's PostgreSQL")
			}
			content = connect.ReplaceAllString(content, fmt.Sprintf("${1}sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}", pg.Port, pg.Reader.User, pg.Database))
		}
		f.configFiles[name] = content
	}
	f.extraConfig = extraConfig
	f.configDirs = map[string]string{}

	// The TLS Secret: a certificate for 127.0.0.1, readable by the image's
	// user only (defaultMode 0440 with fsGroup 65532 in the manifests).
	f.tlsDir = filepath.Join(parent, "tls")
	if err := os.Mkdir(f.tlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := selfSigned(t)
	f.caFile = filepath.Join(parent, "ca.crt")
	for path, data := range map[string][]byte{filepath.Join(f.tlsDir, "tls.crt"): certPEM, filepath.Join(f.tlsDir, "tls.key"): keyPEM, f.caFile: certPEM} {
		if err := os.WriteFile(path, data, 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	f.caPool = x509.NewCertPool()
	f.caPool.AppendCertsFromPEM(certPEM)

	// The Secrets, by the names the Deployment's env reads them.
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pg.Admin.User, pg.Port, pg.Database)
	values := map[string]string{
		"VERIFIERD_STORE_DSN":      dsn,
		"VERIFIERD_STORE_PASSWORD": pg.Admin.Password,
		"VERIFIERD_SIGNING_KEY":    b64Key(t),
		"VERIFIERD_EVIDENCE_KEY":   b64Key(t),
		"VERIFIERD_API_TOKEN":      b64Key(t),
		"CLINIC_DB_PASSWORD":       pg.Reader.Password,
		"UIRB_USER":                recordapp.ReaderUser,
		"UIRB_PASSWORD":            recordapp.ReaderPassword,
	}
	dep := readManifest(t, "deployment.yaml")
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("deployment.yaml: want one container")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	f.secretEnv = map[string]string{"UIRB_USER": values["UIRB_USER"], "UIRB_PASSWORD": values["UIRB_PASSWORD"]}
	for _, ev := range c.Env {
		v, ok := values[ev.Name]
		if !ok {
			t.Fatalf("deployment.yaml sets %s, which this test does not know how to fill", ev.Name)
		}
		f.secretEnv[ev.Name] = v
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, a := range c.Args {
		f.args = append(f.args, expand.ReplaceAllStringFunc(a, func(s string) string { return f.secretEnv[expand.FindStringSubmatch(s)[1]] }))
	}
	return f
}

// configFor writes the ConfigMap's files for the replicas of image, once:
// the daemon config gets the image's own pins (/usr/lib/verifierd/pins.yaml),
// so the daemon refuses any adapter binary but those built into it.
func (f *fleet) configFor(t *testing.T, image string) string {
	t.Helper()
	if dir, ok := f.configDirs[image]; ok {
		return dir
	}
	dir := filepath.Join(f.parent, fmt.Sprintf("config-%d", len(f.configDirs)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range f.configFiles {
		if name == "daemon.yaml" {
			var d map[string]any
			if err := yaml.Unmarshal([]byte(content), &d); err != nil {
				t.Fatal(err)
			}
			pins, err := podman("run", "--rm", "--label", "io.verifierd.image-test="+f.e.run, "--read-only", "--network=none", "--entrypoint", "/bin/cat", image, "/usr/lib/verifierd/pins.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var p map[string]any
			if err := yaml.Unmarshal([]byte(pins), &p); err != nil || p["plugins"] == nil {
				t.Fatalf("%s's pins.yaml: %v\n%s", image, err, pins)
			}
			d["plugins"] = p["plugins"]
			if f.extraConfig != nil {
				f.extraConfig(d, dir)
			}
			b, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			content = string(b)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.configDirs[image] = dir
	return dir
}

// selfSigned makes a certificate and key for 127.0.0.1 and localhost.
func selfSigned(t *testing.T) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "verifierd image test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// start runs a replica of image: the Deployment's args with its three
// listeners moved to free loopback ports, on the host network (nothing is
// published through a bridge), as uid 65532 with a read-only root
// filesystem, every capability dropped, and one writable volume, the data
// dir.
func (f *fleet) start(t *testing.T, name, image string) *replica {
	t.Helper()
	r := &replica{name: fmt.Sprintf("verifierd-imagetest-%s-%s", f.e.run, name), image: image}
	dir, err := os.MkdirTemp("", "imagetest-data-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	r.dataDir = dir
	r.configDir = f.configFor(t, image)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", r.name, logs(r.name))
		}
		if _, err := podman("rm", "--force", "--time", "5", r.name); err != nil {
			t.Errorf("removing %s: %v", r.name, err)
		}
		os.RemoveAll(dir)
	})
	// A port freePort found free may be taken by another process before
	// the daemon binds it (the machine runs other tests): then the replica
	// is started again on other ports.
	for attempt := 1; ; attempt++ {
		r.args = nil
		r.grpc = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		r.http = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		r.health = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		for _, a := range f.args {
			switch {
			case strings.HasPrefix(a, "--listen="):
				a = "--listen=" + r.grpc
			case strings.HasPrefix(a, "--http-listen="):
				a = "--http-listen=" + r.http
			case strings.HasPrefix(a, "--health-listen="):
				a = "--health-listen=" + r.health
			}
			r.args = append(r.args, a)
		}
		if err := f.run(r); err != nil {
			t.Fatal(err)
		}
		err := f.ready(t, r)
		if err == nil {
			return r
		}
		if attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			t.Logf("%s: a port was taken before the daemon bound it; starting it again on other ports", r.name)
			if _, err := podman("rm", "--force", "--time", "5", r.name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Fatal(err)
	}
}

func (f *fleet) run(r *replica) error {
	args := []string{"run", "--detach", "--name", r.name, "--label", "io.verifierd.image-test=" + f.e.run,
		"--network=host", "--read-only", "--user=65532:65532", "--cap-drop=all", "--security-opt=no-new-privileges",
		"--volume", r.dataDir + ":/var/lib/verifierd",
		"--volume", r.configDir + ":/etc/verifierd/config:ro",
		"--volume", f.tlsDir + ":/etc/verifierd/tls:ro"}
	// -e NAME passes the variable from podman's own environment: no
	// secret on a command line.
	cmdEnv := os.Environ()
	for k, v := range f.secretEnv {
		args = append(args, "--env", k)
		cmdEnv = append(cmdEnv, k+"="+v)
	}
	args = append(append(args, r.image), r.args...)
	cmd := exec.Command("podman", args...)
	cmd.Env = cmdEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman run %s: %v\n%s", r.name, err, out)
	}
	return nil
}

// waitReady waits for the readiness the Deployment probes: the
// VerifierService's gRPC health on the health listener.
func (f *fleet) waitReady(t *testing.T, r *replica) {
	t.Helper()
	if err := f.ready(t, r); err != nil {
		t.Fatal(err)
	}
}

// ready is waitReady's wait; its error carries the container's log.
func (f *fleet) ready(t *testing.T, r *replica) error {
	t.Helper()
	conn, err := grpc.NewClient(r.health, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "verifierd.verifier.v1.VerifierService"})
		cancel()
		if err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if inspect(t, r, "{{.State.Running}}") == "false" || time.Now().After(deadline) {
			return fmt.Errorf("%s not ready (%v %v):\n%s", r.name, res.GetStatus(), err, logs(r.name))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ctl runs the host's verifyctl against a replica, over TLS with the token,
// and returns stdout and the exit code.
func (f *fleet) ctl(t *testing.T, r *replica, args ...string) (string, int) {
	t.Helper()
	if r != nil {
		args = append(args, "--addr", r.grpc, "--tls-ca", f.caFile, "--token-env", "VERIFIERD_API_TOKEN")
	}
	cmd := exec.Command(f.e.ctl, args...)
	cmd.Env = append(os.Environ(), "VERIFIERD_API_TOKEN="+f.secretEnv["VERIFIERD_API_TOKEN"])
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

// verdicts is what verifyctl verify prints, summarised.
type verifyOut struct {
	Outcome string `json:"outcome"`
	Effects []struct {
		Verdict   string `json:"verdict"`
		Result    string `json:"result"`
		Tier      int    `json:"tier"`
		Substrate string `json:"substrate"`
		Reasons   []struct {
			Code string `json:"code"`
		} `json:"reasons"`
	} `json:"effects"`
}

func (v verifyOut) summary() string {
	parts := []string{v.Outcome}
	for _, e := range v.Effects {
		var codes []string
		for _, r := range e.Reasons {
			codes = append(codes, r.Code)
		}
		parts = append(parts, fmt.Sprintf("%s/%s/%d/%s", e.Verdict, e.Substrate, e.Tier, strings.Join(codes, "+")))
	}
	return strings.Join(parts, " ")
}

func (f *fleet) begin(t *testing.T, r *replica, args ...string) string {
	t.Helper()
	out, code := f.ctl(t, r, append([]string{"begin"}, args...)...)
	var b struct {
		SessionID string `json:"session_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.SessionID == "" {
		t.Fatalf("begin on %s: exit %d %s\n%s", r.name, code, out, logs(r.name))
	}
	return b.SessionID
}

func (f *fleet) verify(t *testing.T, r *replica, session string, extra ...string) verifyOut {
	t.Helper()
	out, code := f.ctl(t, r, append([]string{"verify", "--session", session}, extra...)...)
	var v verifyOut
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Outcome == "" {
		t.Fatalf("verify on %s: exit %d %s\n%s", r.name, code, out, logs(r.name))
	}
	return v
}

// logs returns a container's log: the daemon writes to stderr, which
// podman logs replays on its own stderr.
func logs(name string) string {
	out, err := exec.Command("podman", "logs", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(podman logs %s: %v) %s", name, err, out)
	}
	return string(out)
}

// inspect returns a podman inspect field of a replica's container.
func inspect(t *testing.T, r *replica, format string) string {
	t.Helper()
	out, err := podman("inspect", "--format", format, r.name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestReplicasInContainers: Begin on a replica of the full image, `podman
// kill` it, the automation writes, Verify on a replica of the slim image:
// the verdict needs the baseline the killed replica stored, and the receipt
// checks offline with the fleet's key. Then the metrics and health of the
// survivor, the user and file system the containers run with, and the
// killed replica started again serving a session begun on the other.
func TestReplicasInContainers(t *testing.T) {
	e := setup(t)
	f := newFleet(t, e, nil)
	a := f.start(t, "a", e.full)
	b := f.start(t, "b", e.slim)

	// The containers run as the manifests require.
	for _, r := range []*replica{a, b} {
		if got := inspect(t, r, "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}}"); got != "65532:65532 true host" {
			t.Errorf("%s runs as %q; want 65532:65532 true host", r.name, got)
		}
		// The root filesystem refuses writes; the data volume takes them.
		if out, err := podman("exec", r.name, "/bin/sh", "-c", "id -u; touch /usr/lib/verifierd/x 2>/dev/null && echo root-writable; touch /var/lib/verifierd/probe && echo data-writable"); err != nil || out != "65532\ndata-writable\n" {
			t.Errorf("%s: uid and writes: %q %v; want 65532, the root read-only, the data dir writable", r.name, out, err)
		}
	}

	ctx := context.Background()
	write := func(patient, note string) {
		t.Helper()
		if err := f.pg.Exec(ctx, f.pg.Database, fmt.Sprintf(`INSERT INTO encounters (patient_id, type, note) VALUES ('%s', 'Triage', '%s')`, patient, note)); err != nil {
			t.Fatal(err)
		}
	}
	step := []string{"--deployment-name", "clinic", "--workflow", "triage", "--step", "save_triage"}

	// Three sessions begun on A. p1 had a triage visit already, which only
	// A's stored baseline tells apart from the new one; p2 is written
	// cleanly; p3 is never written. p3 is begun after the other two saves:
	// with a census, HALTED_BEFORE_EFFECT needs nothing to have appeared in
	// the collection since its Begin (a save after it would be
	// UNEXPLAINED_CHANGE).
	write("p1", "earlier visit")
	s1 := f.begin(t, a, append(step, "--param", "patient_id=p1", "--param", "note=Follow-up in 2 weeks")...)
	s2 := f.begin(t, a, append(step, "--param", "patient_id=p2", "--param", "note=Call back")...)
	write("p1", "Follow-up in 2 weeks")
	write("p2", "Call back")
	s3 := f.begin(t, a, append(step, "--param", "patient_id=p3", "--param", "note=Never saved")...)
	if _, err := podman("kill", a.name); err != nil {
		t.Fatal(err)
	}
	if got := inspect(t, a, "{{.State.Running}}"); got != "false" {
		t.Fatalf("%s still runs after podman kill", a.name)
	}

	dir := t.TempDir()
	rcpt := filepath.Join(dir, "receipt.json")
	for _, c := range []struct {
		session, want string
		extra         []string
	}{
		// The new visit counted exactly once (the baseline's census), its
		// note matching two visits: ambiguous, so reconciliation.
		{s1, "RECONCILIATION_REQUIRED CONFIRMED/sql/1/COUNT_EXACT REFUTED/sql/1/FIELD_AMBIGUOUS", nil},
		{s2, "VERIFIED CONFIRMED/sql/1/COUNT_EXACT CONFIRMED/sql/1/FIELD_EQUAL", []string{"--receipt-out", rcpt}},
		// An irreversible step whose write never landed.
		{s3, "HALTED_BEFORE_EFFECT REFUTED/sql/1/COUNT_UNDER REFUTED/sql/1/FIELD_NO_MATCH", nil},
	} {
		if got := f.verify(t, b, c.session, c.extra...).summary(); got != c.want {
			t.Errorf("verify of A's session %s on B = %s\nwant %s", c.session, got, c.want)
		}
	}

	// The receipt checks offline against the fleet's public key.
	keyOut, code := f.ctl(t, b, "key")
	if code != 0 {
		t.Fatalf("verifyctl key: exit %d %s", code, keyOut)
	}
	keyFile := filepath.Join(dir, "key.json")
	if err := os.WriteFile(keyFile, []byte(keyOut), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := f.ctl(t, nil, "receipt", "verify", "--receipt", rcpt, "--public-key", keyFile, "--expect-session", s2, "--expect-deployment", "clinic", "--expect-step", "save_triage"); code != 0 {
		t.Errorf("receipt verify: exit %d %s", code, out)
	}
	// And a receipt altered by one byte does not.
	raw, err := os.ReadFile(rcpt)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, bytes.Replace(raw, []byte(`"payload":"`), []byte(`"payload":"A`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, code := f.ctl(t, nil, "receipt", "verify", "--receipt", bad, "--public-key", keyFile); code == 0 {
		t.Error("an altered receipt verified")
	}

	// /metrics over the HTTP listener (TLS, bearer token) counts B's two
	// verifications; /health answers.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.caPool}}}
	get := func(path string, token bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+b.http+path, nil)
		if token {
			req.Header.Set("Authorization", "Bearer "+f.secretEnv["VERIFIERD_API_TOKEN"])
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	code, body := get("/metrics", true)
	var counted []string
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "verifierd_sessions_verified_total") && !strings.HasSuffix(strings.TrimSpace(line), " 0") {
			counted = append(counted, strings.TrimSpace(line))
		}
	}
	t.Logf("/metrics on B: %s", strings.Join(counted, "; "))
	if want := []string{`verifierd_sessions_verified_total{deployment="clinic",outcome="HALTED_BEFORE_EFFECT"} 1`, `verifierd_sessions_verified_total{deployment="clinic",outcome="RECONCILIATION_REQUIRED"} 1`,
		`verifierd_sessions_verified_total{deployment="clinic",outcome="VERIFIED"} 1`}; code != 200 || !slices.Equal(counted, want) {
		t.Errorf("/metrics: %d, counting %v\nwant %v", code, counted, want)
	}
	if code, _ := get("/metrics", false); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", code)
	}
	if code, body := get("/health", true); code != 200 {
		t.Errorf("/health: %d %s", code, body)
	}

	// A started again (the same container, the same args): it serves a
	// session B began.
	if _, err := podman("start", a.name); err != nil {
		t.Fatal(err)
	}
	f.waitReady(t, a)
	s4 := f.begin(t, b, append(step, "--param", "patient_id=p4", "--param", "note=New rash")...)
	write("p4", "New rash")
	if got, want := f.verify(t, a, s4).summary(), "VERIFIED CONFIRMED/sql/1/COUNT_EXACT CONFIRMED/sql/1/FIELD_EQUAL"; got != want {
		t.Errorf("begun on B, verified on A after its restart = %s\nwant %s", got, want)
	}

	// The slim image has no browser adapters; the full one has all.
	for r, want := range map[*replica]bool{a: true, b: false} {
		out, err := podman("exec", r.name, "/bin/sh", "-c", "ls /usr/lib/verifierd; command -v chromium || true")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"verifier-adapter-ui_readback", "verifier-adapter-onscreen", "/usr/bin/chromium"} {
			if strings.Contains(out, k) != want {
				t.Errorf("%s (%s): %s present %v, want %v", r.name, r.image, k, !want, want)
			}
		}
		if !strings.Contains(out, "verifier-adapter-sql") || !strings.Contains(out, "pins.yaml") {
			t.Errorf("%s: /usr/lib/verifierd lacks the sql adapter or pins.yaml:\n%s", r.name, out)
		}
	}
}

// The browser deployments the full image's test registers beside the
// ConfigMap's clinic: a ui_readback read-back of the record application and
// an onscreen read of the screen application in the automation's browser.
const uiDeployment = `effects:
  kind: ui_readback
  newness: newly_matching
  ui_readback:
    record_url: "%[1]s/patients/{patient}/encounters"
    url_params: {patient: {param: patient_id}}
    sign_in:
      url: %[1]s/login
      username_selector: "#username"
      password_selector: "#password"
      submit_selector: "button[type=submit]"
      signed_in_selector: "#user-menu"
      username_env: UIRB_USER
      password_env: UIRB_PASSWORD
    ready_selector: "#encounters"
    empty_selector: "#no-encounters"
    not_found_selector: "#not-found"
    row_selector: "tr.encounter"
    fields:
      id: {attribute: data-id}
      type: {selector: td.type, casefold: true}
      note: {selector: td.note}
    identity:
      reader: {selector: "#patient-mrn"}
      value: {param: patient_id}
      field: patient_id
    navigation_timeout_s: 20
`

const uiWorkflow = `schema: verifierd.workflow/v1
name: records
params: {patient_id: {}, note: {}}
policy:
  subject_params: [patient_id]
steps:
  - step: save_triage
    risk: irreversible
    enters: [note]
    effects:
      - kind: record_written
        match: {patient_id: {param: patient_id}, type: triage}
        count_new_only: true
        risk: irreversible
        timeout_s: 5
      - kind: field_equals
        match: {patient_id: {param: patient_id}, type: triage}
        field: note
        value: {param: note}
        timeout_s: 5
`

const screenDeployment = `effects:
  candidates:
    - kind: onscreen
      newness: newly_matching
      onscreen:
        screen: {cdp_url: %q, page_url_prefix: %q}
        renavigate:
          - open: "%s/records/{ref}"
          - wait: {selector: "#record"}
        absent_selector: "#not-found"
        fields:
          - {param: holder, region: %s}
          - {param: amount, selector: "#amount"}
`

const screenWorkflow = `schema: verifierd.workflow/v1
name: screen
params: {ref: {}, holder: {}, amount: {}}
policy:
  subject_params: [amount]
steps:
  - step: save
    risk: irreversible
    enters: [holder, amount]
    effects:
      - kind: record_written
        match: {amount: {param: amount}}
        count_new_only: true
        risk: irreversible
        timeout_s: 10
      - kind: field_equals
        match: {amount: {param: amount}}
        field: holder
        value: {param: holder}
        timeout_s: 10
`

// TestBrowserAdaptersInImage: inside the full image, ui_readback signs in to
// a record application with the image's Chromium and reads a patient's
// page back (tier 2), and onscreen reads a record off the automation's
// browser screen with the image's Tesseract (tier 3).
func TestBrowserAdaptersInImage(t *testing.T) {
	e := setup(t)
	app, err := recordapp.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	screen, err := screenapp.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { screen.Close() })
	cdp := automationBrowser(t)
	alloc, cancelAlloc := remote.NewAllocator(context.Background(), cdp)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if _, err := chromedp.Run(tab, chromedp.Navigate(screen.URL+"/new")); err != nil {
		t.Fatal(err)
	}
	region, _ := json.Marshal(screenapp.Fields["name"])

	f := newFleet(t, e, func(d map[string]any, dir string) {
		files := map[string]string{
			"records.yaml":          fmt.Sprintf(uiDeployment, app.URL),
			"records-workflow.yaml": uiWorkflow,
			"screen.yaml":           fmt.Sprintf(screenDeployment, cdp, screen.URL+"/", screen.URL, region),
			"screen-workflow.yaml":  screenWorkflow,
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d["deployments"].(map[string]any)["records"] = "/etc/verifierd/config/records.yaml"
		d["deployments"].(map[string]any)["screen"] = "/etc/verifierd/config/screen.yaml"
		d["workflows"].(map[string]any)["records"] = "/etc/verifierd/config/records-workflow.yaml"
		d["workflows"].(map[string]any)["screen"] = "/etc/verifierd/config/screen-workflow.yaml"
		s := d["secrets"].(map[string]any)
		s["allow"] = append(s["allow"].([]any), "UIRB_USER", "UIRB_PASSWORD")
	})
	r := f.start(t, "browser", e.full)

	t.Run("ui_readback", func(t *testing.T) {
		const note = "Follow-up in 2 weeks"
		app.App.Add(recordapp.Encounter{PatientID: "u1", Type: "Vitals", Note: "BP 120/80", Date: "2026-05-05"})
		s := f.begin(t, r, "--deployment-name", "records", "--workflow", "records", "--step", "save_triage", "--param", "patient_id=u1", "--param", "note="+note)
		app.App.Add(recordapp.Encounter{PatientID: "u1", Type: "Triage", Note: note, Date: "2026-05-06"})
		if got, want := f.verify(t, r, s).summary(), "VERIFIED CONFIRMED/ui_readback/2/COUNT_EXACT CONFIRMED/ui_readback/2/FIELD_EQUAL"; got != want {
			t.Errorf("ui_readback verify = %s\nwant %s", got, want)
		}
	})
	t.Run("onscreen", func(t *testing.T) {
		rec := screenapp.Record{Ref: "img-1", Name: "Grace Hopper", Born: "1906-12-09", Amount: "4,512.75"}
		s := f.begin(t, r, "--deployment-name", "screen", "--workflow", "screen", "--step", "save", "--param", "ref="+rec.Ref, "--param", "holder="+rec.Name, "--param", "amount="+rec.Amount)
		screen.Put(rec)
		v := f.verify(t, r, s)
		if v.Outcome != "VERIFIED" || len(v.Effects) != 2 {
			t.Fatalf("onscreen verify = %s; want VERIFIED", v.summary())
		}
		for _, eff := range v.Effects {
			if eff.Verdict != "CONFIRMED" || eff.Substrate != "onscreen" || eff.Tier != 3 {
				t.Errorf("onscreen effect %+v; want CONFIRMED by onscreen at tier 3", eff)
			}
		}
	})
}

// automationBrowser starts the automation's headless Chromium on the host
// with the DevTools protocol on loopback (the onscreen adapter in the
// container reads its screen over the host network) and returns its
// http:// DevTools address. It is stopped, by its own process group, when
// the test ends.
func automationBrowser(t *testing.T) string {
	t.Helper()
	var bin string
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("no Chromium on the host for the automation's browser; run scripts/deps.sh")
	}
	dir, err := os.MkdirTemp("", "imagetest-browser-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "--window-size=1024,768", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "about:blank")
	cmd.Env = []string{"HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = newProcessGroup()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopGroup(cmd)
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	found := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var all []byte
		for {
			n, err := stderr.Read(buf)
			all = append(all, buf[:n]...)
			if m := regexp.MustCompile(`DevTools listening on ws://([^/\s]+)/`).FindSubmatch(all); m != nil {
				select {
				case found <- string(m[1]):
				default:
				}
				_, _ = io.Copy(io.Discard, stderr) // drain, so the browser never blocks on a full pipe
				return
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case host := <-found:
		return "http://" + host
	case <-time.After(60 * time.Second):
		t.Fatal("the automation's Chromium did not print its DevTools address")
	}
	return ""
}

// newProcessGroup puts a process in a group of its own (stopGroup stops
// its helpers with it) and kills it if the test process dies first (a
// timeout's panic runs no cleanup).
func newProcessGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopGroup stops a process and its children by the process group the
// process leads: SIGTERM, then SIGKILL after 10 s.
func stopGroup(cmd *exec.Cmd) {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

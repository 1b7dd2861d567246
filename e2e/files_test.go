package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/verifierd/verifierd/internal/testservers/smtp"
	"github.com/verifierd/verifierd/internal/testservers/sshd"
)

// The file, email and document adapters through the real daemon: begin ->
// the automation drops a file, sends a mail or writes a report -> verify.

// beginWith runs verifyctl begin with a deployment, effects and name=value
// parameters, and fails the test unless it succeeds.
func (d *daemon) beginWith(t *testing.T, deployment, effects string, params ...string) beginOutput {
	t.Helper()
	args := []string{"begin", "--deployment-name", d.register(t, deployment), "--effects", effects}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	out, code := d.ctl(t, args...)
	if code != 0 {
		t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	return mustJSON[beginOutput](t, out)
}

// preflightOK checks that verifyctl preflight finds the deployment's one
// candidate reachable at tier 1.
func (d *daemon) preflightOK(t *testing.T, deployment, kind string) {
	t.Helper()
	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, deployment))
	type cand struct {
		Kind      string `json:"kind"`
		Tier      int    `json:"tier"`
		Reachable bool   `json:"reachable"`
		Message   string `json:"message"`
	}
	cs := mustJSON[[]cand](t, out)
	if code != 0 || len(cs) != 1 || cs[0].Kind != kind || cs[0].Tier != 1 || !cs[0].Reachable {
		t.Fatalf("preflight exit %d: %s; want one reachable %s candidate at tier 1", code, out, kind)
	}
}

// checkVerify verifies the session and compares its summary, and checks
// every effect was read at tier 1 through kind.
func (d *daemon) checkVerify(t *testing.T, id, kind, want string) verifyOutput {
	t.Helper()
	v := d.verify(t, id)
	if got := v.summary(); got != want {
		t.Errorf("verify = %s\nwant     %s\nreasons: %+v", got, want, v.Effects[0].Reasons)
	}
	for i, e := range v.Effects {
		if e.Tier != 1 || e.Substrate != kind {
			t.Errorf("effect %d: tier/substrate = %d/%s; want 1/%s", i, e.Tier, e.Substrate, kind)
		}
	}
	return v
}

func dropFile(t *testing.T, dir, name, content string, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if age > 0 {
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// fileEffects: the export arrived (once, new since begin), is not empty,
// carries the order line, and is fresh.
const fileEffects = `
- kind: record_written
  match: {name: {param: file}}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {name: {param: file}}
  field: size_ok
  value: "true"
  timeout_s: 0.5
- kind: field_equals
  match: {name: {param: file}}
  field: content_match
  value: "true"
  timeout_s: 0.5
- kind: field_equals
  match: {name: {param: file}}
  field: fresh
  value: "true"
  timeout_s: 0.5
`

// fileCases are the drop-folder states, for a local folder and for SFTP.
var fileCases = []struct {
	name    string
	content string // "-" drops nothing
	age     time.Duration
	want    string
}{
	{"file arrived", "order,42,100.00\n", 0,
		"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL"},
	{"nothing arrived", "-", 0,
		"HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH REFUTED/refuted/FIELD_NO_MATCH REFUTED/refuted/FIELD_NO_MATCH"},
	{"zero-byte file", "", 0,
		"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH REFUTED/conflicting/FIELD_MISMATCH CONFIRMED/confirmed/FIELD_EQUAL"},
	{"wrong content", "order,43,250.00\n", 0,
		"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL REFUTED/conflicting/FIELD_MISMATCH CONFIRMED/confirmed/FIELD_EQUAL"},
	{"stale file", "order,42,100.00\n", 2 * time.Hour,
		"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL CONFIRMED/confirmed/FIELD_EQUAL REFUTED/conflicting/FIELD_MISMATCH"},
}

func fileSection(drop string) string {
	return fmt.Sprintf(`effects:
  kind: file
  root: %s
  file_pattern: "export-*.csv"
  file_mtime_window_s: 600
  file_content_probe: '(?m)^order,42,'
`, drop)
}

func TestFileArrivalLocal(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	drop := filepath.Join(dir, "drop")
	if err := os.Mkdir(drop, 0o755); err != nil {
		t.Fatal(err)
	}
	dep := writeFile(t, dir, "deployment.yaml", fileSection(drop))
	effects := writeFile(t, dir, "effects.yaml", fileEffects)
	d.preflightOK(t, dep, "file")
	for i, tc := range fileCases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("export-%d.csv", i)
			b := d.beginWith(t, dep, effects, "file="+name)
			if len(b.Effects) != 4 || b.Effects[0].Tier != 1 || b.Effects[0].Candidate != "file" {
				t.Fatalf("begin effects: %+v", b.Effects)
			}
			if tc.content != "-" {
				dropFile(t, drop, name, tc.content, tc.age)
			}
			d.checkVerify(t, b.SessionID, "file", tc.want)
		})
	}
}

// TestFileArrivalSFTP reads the drop folder over SFTP from a real sshd: the
// private key travels as a secret (an environment variable name in the
// deployment), never in a response or a log; a refused host key or client
// key refuses the session before the automation acts; a server gone after
// begin is unavailable, never confirmed.
func TestFileArrivalSFTP(t *testing.T) {
	srv := sshd.Start(t)
	wrongKey, _ := sshd.NewKey(t)
	_, otherHostKey := sshd.NewKey(t)
	d := startDaemon(t, daemonOpts{
		config: "secrets:\n  allow: [E2E_SFTP_*]\n",
		env:    []string{"E2E_SFTP_KEY=" + string(srv.ClientKey), "E2E_SFTP_WRONG_KEY=" + string(wrongKey)},
	})
	dir := t.TempDir()
	drop := filepath.Join(dir, "drop")
	if err := os.Mkdir(drop, 0o755); err != nil {
		t.Fatal(err)
	}
	deployment := func(name, fingerprint, keyEnv string) string {
		return writeFile(t, dir, name, fileSection(drop)+fmt.Sprintf(`  sftp:
    host: %s
    port: %d
    user: %s
    host_key_fingerprint: %q
    private_key_env: %s
`, srv.Host, srv.Port, srv.User, fingerprint, keyEnv))
	}
	dep := deployment("sftp.yaml", srv.HostKeyFingerprint, "E2E_SFTP_KEY")
	effects := writeFile(t, dir, "effects.yaml", fileEffects)
	var responses []string
	d.preflightOK(t, dep, "file")

	for i, tc := range fileCases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("export-%d.csv", i)
			b := d.beginWith(t, dep, effects, "file="+name)
			if tc.content != "-" {
				dropFile(t, drop, name, tc.content, tc.age)
			}
			v := d.checkVerify(t, b.SessionID, "file", tc.want)
			responses = append(responses, fmt.Sprint(v))
		})
	}

	refused := []struct {
		name, dep, want string
	}{
		{"unknown host key", deployment("other-host.yaml", ssh.FingerprintSHA256(otherHostKey), "E2E_SFTP_KEY"), "host key refused"},
		{"wrong client key", deployment("wrong-key.yaml", srv.HostKeyFingerprint, "E2E_SFTP_WRONG_KEY"), "refused the credentials"},
	}
	for _, tc := range refused {
		t.Run(tc.name+" refuses the session", func(t *testing.T) {
			out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, tc.dep), "--effects", effects, "--param", "file=export-x.csv")
			responses = append(responses, out)
			r := mustJSON[beginOutput](t, out)
			if code != 3 || r.Error == nil || r.Error.Code != "FailedPrecondition" || !strings.Contains(r.Error.Message, tc.want) {
				t.Errorf("begin: exit %d, %s; want exit 3, FailedPrecondition, saying %q", code, out, tc.want)
			}
		})
	}

	t.Run("server gone after begin is unavailable", func(t *testing.T) {
		b := d.beginWith(t, dep, effects, "file=export-gone.csv")
		dropFile(t, drop, "export-gone.csv", "order,42,1\n", 0)
		srv.Stop()
		d.checkVerify(t, b.SessionID, "file",
			"RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE INDETERMINATE/unavailable/SOR_UNREACHABLE INDETERMINATE/unavailable/SOR_UNREACHABLE INDETERMINATE/unavailable/SOR_UNREACHABLE")
		srv.Restart(t)
	})

	d.stop()
	secrets := []string{string(srv.ClientKey), string(wrongKey)}
	for _, s := range secrets {
		// The last body line of the PEM is private key material (the first
		// ones are a format header and the public key).
		lines := strings.Split(strings.TrimSpace(s), "\n")
		line := lines[len(lines)-2]
		if strings.Contains(d.logs(), line) {
			t.Error("the daemon log carries a private key")
		}
		for i, r := range responses {
			if strings.Contains(r, line) {
				t.Errorf("response %d carries a private key", i)
			}
		}
	}
}

// TestEmailDelivery sends real mail over SMTP into the capture maildir
// between begin and verify. The contract matches the invoice mail by
// subject and body; the deployment's expected_recipients makes the
// adapter's verdict hook refute a confirmed delivery that also reached
// someone else.
func TestEmailDelivery(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	maildir := filepath.Join(dir, "Maildir")
	srv := smtp.Start(t, maildir)
	dep := writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: email
  root: %s
  file_mtime_window_s: 600
  file_content_probe: 'Total: 100\.00 EUR'
  expected_recipients: [alice@example.com]
`, maildir))
	effects := writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {subject: {param: subject}, body_match: "true", fresh: "true"}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
`)
	d.preflightOK(t, dep, "email")

	message := func(to, cc, subject string) string {
		head := "From: Shop <billing@shop.example>\r\nTo: " + to + "\r\n"
		if cc != "" {
			head += "Cc: " + cc + "\r\n"
		}
		return head + "Subject: " + subject + "\r\nMIME-Version: 1.0\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
			"Invoice attached.=0D=0ATotal: 100.00 EUR\r\n"
	}
	alice := []string{"alice@example.com"}
	tests := []struct {
		name    string
		subject string // the run parameter
		wire    string // the Subject header as sent ("" = subject)
		send    func(subject string)
		want    string
	}{
		{"delivered", "Invoice 1", "", func(s string) { srv.Send(t, "billing@shop.example", alice, message("alice@example.com", "", s)) },
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		{"never sent", "Invoice 2", "", func(string) {},
			"HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER"},
		{"duplicate send", "Invoice 3", "", func(s string) {
			srv.Send(t, "billing@shop.example", alice, message("alice@example.com", "", s))
			srv.Send(t, "billing@shop.example", alice, message("alice@example.com", "", s))
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER"},
		{"leak to another recipient (Bcc)", "Invoice 4", "", func(s string) {
			srv.Send(t, "billing@shop.example", []string{"alice@example.com", "eve@evil.example"}, message("alice@example.com", "", s))
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/EMAIL_UNEXPECTED_RECIPIENT"},
		{"leak to another recipient (Cc)", "Invoice 5", "", func(s string) {
			srv.Send(t, "billing@shop.example", []string{"alice@example.com", "bob@example.com"}, message("alice@example.com", "bob@example.com", s))
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/EMAIL_UNEXPECTED_RECIPIENT"},
		{"wrong recipient", "Invoice 6", "", func(s string) {
			srv.Send(t, "billing@shop.example", []string{"bob@example.com"}, message("bob@example.com", "", s))
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/EMAIL_UNEXPECTED_RECIPIENT"},
		{"RFC 2047 subject", "Rechnung 7 – fällig", "=?UTF-8?Q?Rechnung_7_=E2=80=93_f=C3=A4llig?=", func(s string) {
			srv.Send(t, "billing@shop.example", alice, message("alice@example.com", "", s))
		}, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := d.beginWith(t, dep, effects, "subject="+tc.subject)
			wire := tc.wire
			if wire == "" {
				wire = tc.subject
			}
			tc.send(wire)
			v := d.checkVerify(t, b.SessionID, "email", tc.want)
			if strings.Contains(tc.want, "EMAIL_UNEXPECTED_RECIPIENT") && len(v.Effects) == 1 && len(v.Effects[0].Reasons) == 1 {
				if msg := v.Effects[0].Reasons[0].Message; !strings.Contains(msg, "expected_recipients") {
					t.Errorf("reason message %q does not explain the refusal", msg)
				}
			}
		})
	}
}

// TestDocumentArrival writes JSON confirmations between begin and verify:
// the report must arrive once, parse, be fresh, and carry the ordered SKU.
func TestDocumentArrival(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	exports := filepath.Join(dir, "exports")
	if err := os.Mkdir(exports, 0o755); err != nil {
		t.Fatal(err)
	}
	dep := writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: document
  root: %s
  file_pattern: "confirmation-*.json"
  document_format: json
  document_field_paths: {order: order.id, sku: items.0.sku}
  file_mtime_window_s: 600
`, exports))
	effects := writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {order: {param: order}, parseable: "true", fresh: "true"}
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {order: {param: order}, parseable: "true"}
  field: sku
  value: {param: sku}
  timeout_s: 0.5
`)
	d.preflightOK(t, dep, "document")

	report := func(order, sku string) string {
		return fmt.Sprintf(`{"order": {"id": %q}, "items": [{"sku": %q, "qty": 1}]}`, order, sku)
	}
	tests := []struct {
		name  string
		write func(order string)
		want  string
	}{
		{"report arrived", func(o string) { dropFile(t, exports, "confirmation-"+o+".json", report(o, "A-1"), 0) },
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{"corrupt report", func(o string) {
			dropFile(t, exports, "confirmation-"+o+".json", report(o, "A-1")[:20], 0)
		}, "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH"},
		{"report for another order", func(o string) { dropFile(t, exports, "confirmation-"+o+".json", report(o+"0", "A-1"), 0) },
			"HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER REFUTED/refuted/FIELD_NO_MATCH"},
		{"duplicate reports", func(o string) {
			dropFile(t, exports, "confirmation-"+o+".json", report(o, "A-1"), 0)
			dropFile(t, exports, "confirmation-"+o+"-again.json", report(o, "A-1"), 0)
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{"stale report", func(o string) { dropFile(t, exports, "confirmation-"+o+".json", report(o, "A-1"), 2*time.Hour) },
			"RECONCILIATION_REQUIRED REFUTED/refuted/COUNT_UNDER CONFIRMED/confirmed/FIELD_EQUAL"},
		{"wrong SKU", func(o string) { dropFile(t, exports, "confirmation-"+o+".json", report(o, "B-2"), 0) },
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			order := fmt.Sprint(100 + i)
			b := d.beginWith(t, dep, effects, "order="+order, "sku=A-1")
			tc.write(order)
			d.checkVerify(t, b.SessionID, "document", tc.want)
		})
	}
}

package email

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/smtp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pluginBinary is verifier-adapter-email, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/cmd/plugins/email", Kind, &pluginBinary)
}

func section(t testing.TB, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inProcess(t testing.TB) *adaptertest.Instance {
	t.Helper()
	return adaptertest.InProcess(t, New)
}

func configured(t testing.TB, cfg map[string]any) *adaptertest.Instance {
	t.Helper()
	ip := inProcess(t)
	if err := ip.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, cfg)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// read captures once (after) with the selector and returns the capture id.
func read(t testing.TB, c *adaptertest.Instance, selector map[string]string) (string, *adaptertest.Stream, []sdk.Record) {
	t.Helper()
	id := fmt.Sprintf("after-%d", time.Now().UnixNano())
	capt, err := c.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: id, Selector: selector, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("CaptureAfter returned an error: %v", err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("reading the records: %v", err)
	}
	return id, capt, recs
}

// matching is the records whose fields equal the selector's (as the kit and
// the judge compare them).
func matching(recs []sdk.Record, selector map[string]string) []sdk.Record {
	var out []sdk.Record
	for _, r := range recs {
		if selects(r, selector) {
			out = append(out, r)
		}
	}
	return out
}

// invoice is a message as the shop's mailer sends it.
func invoice(to, subject, messageID string) string {
	return crlf(fmt.Sprintf(`From: Shop Billing <billing@shop.example>
To: %s
Subject: %s
Message-ID: <%s>
Date: %s
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Invoice 42 =E2=80=94 100,00 =E2=82=AC
--alt
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: base64

PHA+SW52b2ljZSA0MiDigJQgMTAwLDAwIOKCrDwvcD4=
--alt--
`, to, subject, messageID, time.Now().UTC().Format(time.RFC1123Z)))
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "email" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("Info = %+v", info.Info)
	}
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      map[string]any
		wantPath string
		wantMsg  string
	}{
		{"no root", map[string]any{}, "root", "missing"},
		{"unknown key", map[string]any{"root": "/m", "file_pattern": "*"}, "file_pattern", "unknown key for kind email"},
		{"wrong kind", map[string]any{"kind": "file", "root": "/m"}, "kind", `not "file"`},
		{"pattern with a folder", map[string]any{"root": "/m", "mail_pattern": "new/*"}, "mail_pattern", "not a path"},
		{"bad pattern", map[string]any{"root": "/m", "mail_pattern": "[x"}, "mail_pattern", "not a valid pattern"},
		{"bad window", map[string]any{"root": "/m", "file_mtime_window_s": -5}, "file_mtime_window_s", "above 0"},
		{"bad probe", map[string]any{"root": "/m", "file_content_probe": "a(b"}, "file_content_probe", "regular expression"},
		{"empty expected_recipients", map[string]any{"root": "/m", "expected_recipients": []string{}}, "expected_recipients", "is empty"},
		{"not an address", map[string]any{"root": "/m", "expected_recipients": []string{"alice@example.com", "bob at example"}}, "expected_recipients[1]", "not an email address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := inProcess(t).Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, tt.cfg)})
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("refused %q: %q; want path %q and %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

// send is one SMTP transaction: envelope sender, envelope recipients (Bcc
// recipients are envelope-only), message.
type send struct {
	from     string
	envelope []string
	raw      string
}

// TestDeliveriesOverSMTP delivers real messages through a real SMTP server
// into the maildir and checks what the captures read.
func TestDeliveriesOverSMTP(t *testing.T) {
	t.Parallel()
	alice := []string{"alice@example.com"}
	forAlice := map[string]string{"to": "alice@example.com", "subject": "Invoice 42"}
	tests := []struct {
		name  string
		sends []send
		check func(t *testing.T, names []string, recs []sdk.Record)
	}{
		{"delivered to alice", []send{{"billing@shop.example", alice, invoice("Alice <alice@example.com>", "Invoice 42", "inv-42@shop.example")}},
			func(t *testing.T, names []string, recs []sdk.Record) {
				got := matching(recs, forAlice)
				if len(got) != 1 {
					t.Fatalf("%d records for alice; want 1: %v", len(got), recs)
				}
				r := got[0]
				for k, want := range map[string]any{
					"id": names[0], "name": names[0], "from": "billing@shop.example", "message_id": "<inv-42@shop.example>",
					"body_match": true, "fresh": true, "parseable": true,
				} {
					if r[k] != want {
						t.Errorf("%s = %v; want %v", k, r[k], want)
					}
				}
				if _, err := time.Parse(time.RFC3339, r["date"].(string)); err != nil {
					t.Errorf("date %v is not RFC 3339: %v", r["date"], err)
				}
			}},
		{"wrong recipient", []send{{"billing@shop.example", []string{"bob@example.com"}, invoice("bob@example.com", "Invoice 42", "inv-42@shop.example")}},
			func(t *testing.T, names []string, recs []sdk.Record) {
				if n := len(matching(recs, forAlice)); n != 0 {
					t.Errorf("a message to bob reads as %d messages to alice", n)
				}
				if len(recs) != 1 || recs[0]["to"] != "bob@example.com" {
					t.Errorf("records %v; want one to bob@example.com", recs)
				}
			}},
		{"duplicate send", []send{
			{"billing@shop.example", alice, invoice("alice@example.com", "Invoice 42", "inv-42@shop.example")},
			{"billing@shop.example", alice, invoice("alice@example.com", "Invoice 42", "inv-42@shop.example")},
		}, func(t *testing.T, names []string, recs []sdk.Record) {
			got := matching(recs, forAlice)
			if len(got) != 2 || got[0]["id"] == got[1]["id"] || got[0]["message_id"] != got[1]["message_id"] {
				t.Errorf("a double send reads as %v; want two records, same message_id, their own ids", got)
			}
		}},
		{"leak to another recipient (Bcc)", []send{{"billing@shop.example", []string{"alice@example.com", "eve@evil.example"}, invoice("alice@example.com", "Invoice 42", "inv-42@shop.example")}},
			func(t *testing.T, names []string, recs []sdk.Record) {
				if len(recs) != 1 || recs[0]["to"] != "alice@example.com,eve@evil.example" {
					t.Errorf("records %v; want to = alice@example.com,eve@evil.example", recs)
				}
				if n := len(matching(recs, forAlice)); n != 0 {
					t.Errorf("a message also delivered to eve matches to=alice alone (%d)", n)
				}
			}},
		{"RFC 2047 subject and display names", []send{{"billing@shop.example", alice, invoice("=?UTF-8?Q?Al=C3=AFce?= <Alice@Example.com>", "=?UTF-8?B?UmVjaG51bmcgNDIg4oCTIGbDpGxsaWc=?=", "inv-42@shop.example")}},
			func(t *testing.T, names []string, recs []sdk.Record) {
				if len(recs) != 1 || recs[0]["subject"] != "Rechnung 42 – fällig" || recs[0]["to"] != "alice@example.com" {
					t.Errorf("records %v; want subject %q to alice@example.com", recs, "Rechnung 42 – fällig")
				}
			}},
		{"body only in a base64 part of a multipart/mixed", []send{{"billing@shop.example", alice, crlf(`From: billing@shop.example
To: alice@example.com
Subject: Invoice 42
Content-Type: multipart/mixed; boundary=mix

--mix
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: base64

SW52b2ljZSA0MiDigJQgMTAwLDAwIOKCrA==
--mix
Content-Type: application/octet-stream
Content-Transfer-Encoding: base64

AAECAw==
--mix--
`)}}, func(t *testing.T, names []string, recs []sdk.Record) {
			if len(recs) != 1 || recs[0]["body_match"] != true {
				t.Errorf("records %v; want body_match true", recs)
			}
		}},
		{"wrong body", []send{{"billing@shop.example", alice, crlf("From: billing@shop.example\nTo: alice@example.com\nSubject: Invoice 42\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\nInvoice 42 =E2=80=94 250,00 =E2=82=AC\n")}},
			func(t *testing.T, names []string, recs []sdk.Record) {
				if len(recs) != 1 || recs[0]["body_match"] != false {
					t.Errorf("records %v; want body_match false", recs)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			maildir := filepath.Join(t.TempDir(), "Maildir")
			srv := smtp.Start(t, maildir)
			c := configured(t, map[string]any{"root": maildir, "file_mtime_window_s": 300, "file_content_probe": `Invoice 42 — 100,00 €`})
			if _, _, recs := read(t, c, nil); len(recs) != 0 {
				t.Fatalf("a new maildir reads as %d messages", len(recs))
			}
			var names []string
			for _, s := range tt.sends {
				names = append(names, srv.Send(t, s.from, s.envelope, s.raw))
			}
			_, capt, recs := read(t, c, nil)
			if !capt.Reachable {
				t.Fatalf("unreachable: %s", capt.Reason)
			}
			tt.check(t, names, recs)
		})
	}
}

// TestUnexpectedRecipientHook: the verdict hook demotes a CONFIRMED verdict
// when a message the effect matched also reached someone outside
// expected_recipients, and only then.
func TestUnexpectedRecipientHook(t *testing.T) {
	t.Parallel()
	selector := map[string]string{"subject": "Invoice 42", "body_match": "true"}
	tests := []struct {
		name       string
		expected   []string
		sends      []send
		selector   map[string]string
		verdict    sdk.Verdict
		captureID  string // "" uses the after read's id; "before" the before read's
		want       sdk.Verdict
		wantCode   string
		wantInText []string
	}{
		{"leak via Bcc is refuted", []string{"alice@example.com"},
			[]send{{"b@shop.example", []string{"alice@example.com", "eve@evil.example"}, invoice("alice@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "", sdk.VerdictRefuted, ReasonUnexpectedRecipient, []string{"eve@evil.example", "1 matched message"}},
		{"leak via Cc is refuted", []string{"Alice <ALICE@example.com>"},
			[]send{{"b@shop.example", []string{"alice@example.com", "mallory@example.com"}, strings.Replace(invoice("alice@example.com", "Invoice 42", "m1@shop"), "Subject:", "Cc: mallory@example.com\r\nSubject:", 1)}},
			selector, sdk.VerdictConfirmed, "", sdk.VerdictRefuted, ReasonUnexpectedRecipient, []string{"mallory@example.com"}},
		{"wrong recipient only is refuted", []string{"alice@example.com"},
			[]send{{"b@shop.example", []string{"bob@example.com"}, invoice("bob@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "", sdk.VerdictRefuted, ReasonUnexpectedRecipient, []string{"bob@example.com"}},
		{"delivered only to the expected recipients", []string{"alice@example.com", "accounts@example.com"},
			[]send{{"b@shop.example", []string{"alice@example.com", "accounts@example.com"}, invoice("alice@example.com, accounts@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "", "", "", nil},
		{"another message's leak is outside the selector", []string{"alice@example.com"},
			[]send{
				{"b@shop.example", []string{"alice@example.com"}, invoice("alice@example.com", "Invoice 42", "m1@shop")},
				{"b@shop.example", []string{"eve@evil.example"}, invoice("eve@evil.example", "Newsletter", "m2@shop")},
			},
			selector, sdk.VerdictConfirmed, "", "", "", nil},
		{"no selector (a shared read) checks every message", []string{"alice@example.com"},
			[]send{
				{"b@shop.example", []string{"alice@example.com"}, invoice("alice@example.com", "Invoice 42", "m1@shop")},
				{"b@shop.example", []string{"eve@evil.example"}, invoice("eve@evil.example", "Newsletter", "m2@shop")},
			},
			nil, sdk.VerdictConfirmed, "", sdk.VerdictRefuted, ReasonUnexpectedRecipient, []string{"eve@evil.example"}},
		{"a refuted verdict is left alone", []string{"alice@example.com"},
			[]send{{"b@shop.example", []string{"alice@example.com", "eve@evil.example"}, invoice("alice@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictRefuted, "", "", "", nil},
		{"without expected_recipients nothing is checked", nil,
			[]send{{"b@shop.example", []string{"alice@example.com", "eve@evil.example"}, invoice("alice@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "", "", "", nil},
		{"an unknown read leaves doubt", []string{"alice@example.com"},
			[]send{{"b@shop.example", []string{"alice@example.com"}, invoice("alice@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "no-such-read", sdk.VerdictIndeterminate, ReasonRecipientsUnknown, []string{"restarted"}},
		{"a before read is not what was judged", []string{"alice@example.com"},
			[]send{{"b@shop.example", []string{"alice@example.com"}, invoice("alice@example.com", "Invoice 42", "m1@shop")}},
			selector, sdk.VerdictConfirmed, "before", sdk.VerdictIndeterminate, ReasonRecipientsUnknown, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			maildir := filepath.Join(t.TempDir(), "Maildir")
			srv := smtp.Start(t, maildir)
			cfg := map[string]any{"root": maildir, "file_content_probe": `Invoice 42`}
			if tt.expected != nil {
				cfg["expected_recipients"] = tt.expected
			}
			c := configured(t, cfg)
			before, err := c.CaptureBefore(t.Context(), sdk.CaptureRequest{CaptureID: "before", Selector: tt.selector, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := before.Records(); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.sends {
				srv.Send(t, s.from, s.envelope, s.raw)
			}
			id, _, _ := read(t, c, tt.selector)
			if tt.captureID != "" {
				id = tt.captureID
			}
			d, err := c.Verdict(t.Context(), sdk.VerdictRequest{CaptureID: id, Verdict: tt.verdict, Tier: sdk.TierIndependentSystem})
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != tt.want || d.ReasonCode != tt.wantCode {
				t.Fatalf("demotion = %+v; want %q %q", d, tt.want, tt.wantCode)
			}
			for _, s := range tt.wantInText {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q does not say %q", d.Message, s)
				}
			}
		})
	}
}

// TestMaildirMove: a reader moving a message from new/ to cur/ (and
// flagging it) does not change its identity, and a message seen in both
// during the move is read once.
func TestMaildirMove(t *testing.T) {
	t.Parallel()
	maildir := filepath.Join(t.TempDir(), "Maildir")
	srv := smtp.Start(t, maildir)
	c := configured(t, map[string]any{"root": maildir})
	name := srv.Send(t, "b@shop.example", []string{"alice@example.com"}, invoice("alice@example.com", "Invoice 42", "m1@shop"))
	ids := func() []string {
		_, _, recs := read(t, c, nil)
		var out []string
		for _, r := range recs {
			out = append(out, r["id"].(string))
		}
		return out
	}
	if diff := cmp.Diff([]string{name}, ids()); diff != "" {
		t.Fatalf("in new/ (-want +got):\n%s", diff)
	}
	raw, err := os.ReadFile(filepath.Join(maildir, "new", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(maildir, "cur", name+":2,S"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{name}, ids()); diff != "" {
		t.Errorf("in new/ and cur/ at once (-want +got):\n%s", diff)
	}
	if err := os.Remove(filepath.Join(maildir, "new", name)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{name}, ids()); diff != "" {
		t.Errorf("moved to cur/ (-want +got):\n%s", diff)
	}
	// tmp/ holds deliveries in progress and is never read.
	if err := os.WriteFile(filepath.Join(maildir, "tmp", "123.partial"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 1 {
		t.Errorf("a file in tmp/ was read: %v", got)
	}
}

// TestCaptureFolder: a plain folder of .eml files (an SMTP capture tool's
// output), stale and unparseable files included, none skipped silently.
func TestCaptureFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	put := func(name, content string, mtime time.Time) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if !mtime.IsZero() {
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("001.eml", invoice("alice@example.com", "Invoice 42", "m1@shop"), time.Time{})
	put("002.eml", invoice("alice@example.com", "Invoice 42", "m2@shop"), time.Now().Add(-48*time.Hour))
	put("003.eml", "this is not\x00 a message", time.Time{})
	put("notes.txt", invoice("alice@example.com", "Invoice 42", "m3@shop"), time.Time{})
	put(".hidden.eml", invoice("alice@example.com", "Invoice 42", "m4@shop"), time.Time{})

	c := configured(t, map[string]any{"root": dir, "file_mtime_window_s": 3600, "file_content_probe": "Invoice 42"})
	_, capt, recs := read(t, c, nil)
	if !capt.Reachable {
		t.Fatal(capt.Reason)
	}
	type row struct {
		ID        string
		Fresh     any
		Parseable any
		Body      any
		Err       bool
	}
	var got []row
	for _, r := range recs {
		_, hasErr := r["parse_error"]
		got = append(got, row{r["id"].(string), r["fresh"], r["parseable"], r["body_match"], hasErr})
	}
	want := []row{
		{"001.eml", true, true, true, false},
		{"002.eml", false, true, true, false},
		{"003.eml", true, false, false, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}

	c = configured(t, map[string]any{"root": dir, "mail_pattern": "*.txt"})
	if _, _, recs := read(t, c, nil); len(recs) != 1 || recs[0]["id"] != "notes.txt" {
		t.Errorf("mail_pattern *.txt reads %v; want notes.txt", recs)
	}
}

func TestRootGone(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "Maildir")
	c := configured(t, map[string]any{"root": root})
	if res, err := c.TestConnection(t.Context()); err != nil || res.Reachable {
		t.Errorf("TestConnection on a missing capture point = %+v, %v; want unreachable", res, err)
	}
	_, capt, _ := read(t, c, nil)
	if capt.Reachable || !strings.Contains(capt.Reason, root) {
		t.Errorf("missing capture point: reachable=%v reason %q", capt.Reachable, capt.Reason)
	}
	smtp.Start(t, root)
	res, err := c.TestConnection(t.Context())
	if err != nil || !res.Reachable || !strings.Contains(res.Message, "maildir") {
		t.Errorf("TestConnection on a maildir = %+v, %v", res, err)
	}
}

// TestPluginBinary: the real binary reads an SMTP delivery and its verdict
// hook demotes a leak, as the daemon would see it.
func TestPluginBinary(t *testing.T) {
	t.Parallel()
	maildir := filepath.Join(t.TempDir(), "Maildir")
	srv := smtp.Start(t, maildir)
	bin := adaptertest.Subprocess(t, pluginBinary)
	cfg := map[string]any{"kind": Kind, "root": maildir, "file_content_probe": "Invoice 42", "expected_recipients": []string{"alice@example.com"}}
	if err := bin.Configure(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: section(t, cfg)}); err != nil {
		t.Fatal(err)
	}
	srv.Send(t, "b@shop.example", []string{"alice@example.com", "eve@evil.example"}, invoice("alice@example.com", "Invoice 42", "m1@shop"))
	id, capt, recs := read(t, bin, map[string]string{"subject": "Invoice 42"})
	if !capt.Reachable || len(recs) != 1 || recs[0]["body_match"] != true {
		t.Fatalf("through the binary: reachable=%v records=%v", capt.Reachable, recs)
	}
	d, err := bin.Verdict(t.Context(), sdk.VerdictRequest{CaptureID: id, Verdict: sdk.VerdictConfirmed})
	if err != nil || d.Verdict != sdk.VerdictRefuted || d.ReasonCode != ReasonUnexpectedRecipient {
		t.Errorf("hook through the binary = %+v, %v", d, err)
	}
}

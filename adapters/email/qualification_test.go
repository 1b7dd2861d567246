package email

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/smtp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// qualify runs the kit against a maildir fed by a real SMTP server. The
// selected entity is the invoice mail to alice; the wrong entity the same
// mail to bob. SeedMany writes its messages straight into new/, as a
// delivery agent would, because fifty thousand SMTP transactions add
// nothing but time.
func qualify(t *testing.T, binary string) {
	maildir := filepath.Join(t.TempDir(), "Maildir")
	srv := smtp.Start(t, maildir)
	const sender = "billing@shop.example"
	var seeded atomic.Int64
	config := func(t *testing.T) sdk.ConfigureRequest {
		return sdk.ConfigureRequest{Kind: Kind, Config: section(t, map[string]any{"kind": Kind, "root": maildir, "file_content_probe": "Invoice 42"})}
	}
	mail := func(to string) string {
		return invoice(to, "Invoice 42", fmt.Sprintf("%d@shop.example", time.Now().UnixNano()))
	}
	h := adaptertest.Harness{
		Binary: binary,
		Config: config,
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest {
			if os.Geteuid() == 0 {
				t.Skip("a maildir has no credentials but its permissions, which root bypasses")
			}
			locked := filepath.Join(t.TempDir(), "locked")
			if err := os.Mkdir(locked, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
			return sdk.ConfigureRequest{Kind: Kind, Config: section(t, map[string]any{"root": locked})}
		},
		Selector:      map[string]string{"to": "alice@example.com", "subject": "Invoice 42", "body_match": "true"},
		IdentityField: "id",
		Reset: func(t *testing.T) {
			for _, sub := range []string{"new", "cur", "tmp"} {
				entries, err := os.ReadDir(filepath.Join(maildir, sub))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if err := os.Remove(filepath.Join(maildir, sub, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
		WriteCorrect: func(t *testing.T) string {
			return srv.Send(t, sender, []string{"alice@example.com"}, mail("alice@example.com"))
		},
		WriteWrongEntity: func(t *testing.T) string {
			return srv.Send(t, sender, []string{"bob@example.com"}, mail("bob@example.com"))
		},
		WriteDuplicate: func(t *testing.T) string {
			return srv.Send(t, sender, []string{"alice@example.com"}, mail("alice@example.com"))
		},
		WriteStale: func(t *testing.T) (string, string) {
			old := crlf("From: billing@shop.example\nTo: alice@example.com\nSubject: Invoice 42\nDate: Sat, 03 Feb 2001 04:05:06 +0000\n\nInvoice 42\n")
			srv.Send(t, sender, []string{"alice@example.com"}, old)
			return "date", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				srv.Send(t, sender, []string{"alice@example.com"}, mail("alice@example.com"))
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, reachable bool) {
			away := maildir + ".away"
			from, to := maildir, away
			if reachable {
				from, to = away, maildir
			}
			if _, err := os.Stat(from); err != nil {
				return
			}
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) {
			raw := []byte(mail("alice@example.com"))
			for range n {
				name := fmt.Sprintf("%d.seed%d.capture.test", time.Now().Unix(), seeded.Add(1))
				if err := os.WriteFile(filepath.Join(maildir, "new", name), raw, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	if binary == "" {
		h.Factory = New
	}
	adaptertest.Run(t, h)
}

func TestQualificationInProcess(t *testing.T) { qualify(t, "") }

func TestQualificationBinary(t *testing.T) { qualify(t, pluginBinary) }

// Package smtp runs a real SMTP server (github.com/emersion/go-smtp) on
// 127.0.0.1 for tests, delivering every accepted message into a maildir the
// way a local delivery agent does: written under tmp/, then moved into
// new/, with a Return-Path header and one Delivered-To header per envelope
// recipient put in front of the message as sent. Messages are sent to it
// with net/smtp, as an application would.
package smtp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	netsmtp "net/smtp"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Server is one running SMTP server.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Maildir receives the messages; it has cur/, new/ and tmp/.
	Maildir string

	srv       *smtp.Server
	seq       atomic.Int64
	sendMu    sync.Mutex
	delivered chan string
}

// Start runs a server delivering into maildir (created with cur/, new/
// and tmp/ when missing) and stops it when the test ends.
func Start(t testing.TB, maildir string) *Server {
	t.Helper()
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(maildir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Maildir: maildir, delivered: make(chan string, 64)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	s.srv.Domain = "capture.test"
	s.srv.ReadTimeout = time.Minute
	s.srv.WriteTimeout = time.Minute
	s.srv.MaxMessageBytes = 32 << 20
	s.srv.MaxRecipients = 100
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	go s.srv.Serve(l)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Send submits msg over SMTP from from to the envelope recipients to (Bcc
// recipients are simply envelope recipients absent from the headers) and
// returns the maildir file name it was delivered as. Sends through one
// Server are serialised.
func (s *Server) Send(t testing.TB, from string, to []string, msg string) string {
	t.Helper()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := netsmtp.SendMail(s.Addr, nil, from, to, []byte(msg)); err != nil {
		t.Fatalf("sending over SMTP to %s: %v", s.Addr, err)
	}
	select {
	case name := <-s.delivered:
		return name
	case <-time.After(10 * time.Second):
		t.Fatal("the server accepted a message but did not deliver it")
		return ""
	}
}

// uniqueName is a maildir file name: time, a sequence and the host.
func (s *Server) uniqueName() string {
	now := time.Now()
	return fmt.Sprintf("%d.M%dP%dQ%d.capture.test", now.Unix(), now.Nanosecond()/1000, os.Getpid(), s.seq.Add(1))
}

// deliver writes one message into the maildir.
func (s *Server) deliver(from string, rcpts []string, body io.Reader) (string, error) {
	var head bytes.Buffer
	fmt.Fprintf(&head, "Return-Path: <%s>\r\n", from)
	for _, r := range rcpts {
		fmt.Fprintf(&head, "Delivered-To: %s\r\n", r)
	}
	name := s.uniqueName()
	tmp := filepath.Join(s.Maildir, "tmp", name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, io.MultiReader(&head, body))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.Maildir, "new", name))
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return name, nil
}

type session struct {
	s     *Server
	from  string
	rcpts []string
}

func (ss *session) Reset()        { ss.from, ss.rcpts = "", nil }
func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.rcpts = append(ss.rcpts, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	if len(ss.rcpts) == 0 {
		return errors.New("no recipients")
	}
	name, err := ss.s.deliver(ss.from, ss.rcpts, r)
	if err != nil {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "delivery failed: " + err.Error()}
	}
	select {
	case ss.s.delivered <- name:
	default:
	}
	return nil
}

package email

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/mail"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Reason codes of the verdict hook.
const (
	// ReasonUnexpectedRecipient: a message the effect matched was also
	// delivered to an address outside expected_recipients.
	ReasonUnexpectedRecipient = "EMAIL_UNEXPECTED_RECIPIENT"
	// ReasonRecipientsUnknown: the judged read is no longer held (the
	// adapter restarted), so its recipients could not be checked.
	ReasonRecipientsUnknown = "EMAIL_RECIPIENTS_UNKNOWN"
)

// Default mail_pattern values: every message of a maildir; the .eml files
// of a plain capture folder.
const (
	defaultMaildirPattern = "*"
	defaultFolderPattern  = "*.eml"
)

type config struct {
	Root               string      `json:"root"`
	MailPattern        string      `json:"mail_pattern"`
	FileMtimeWindowS   json.Number `json:"file_mtime_window_s"`
	FileContentProbe   string      `json:"file_content_probe"`
	ExpectedRecipients []string    `json:"expected_recipients"`
}

type settings struct {
	root     string // absolute
	pattern  string // "" until the layout is known
	window   time.Duration
	probe    *regexp.Regexp
	expected map[string]bool // nil: no recipient check
	// ledger remembers, per after-read, the leaks found in it.
	ledger *sdk.ReadLog[[]leak]
}

var (
	_ sdk.AfterReader = (*settings)(nil)
	_ sdk.VerdictHook = (*settings)(nil)
)

// New returns an unconfigured email adapter, which reads the messages
// delivered to a maildir or a capture folder; it is the factory for
// plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks the section; it does not look at the folder, whose
// absence is an outage the captures report.
func configure(_ context.Context, cfg config, _ sdk.ConfigureRequest) (*settings, error) {
	if cfg.Root == "" {
		return nil, &refusal.Error{Path: "root", Message: "missing: name the maildir (the folder holding cur/ and new/) or the folder of captured .eml files"}
	}
	s := &settings{pattern: cfg.MailPattern, ledger: &sdk.ReadLog[[]leak]{Size: ledgerSize}}
	var err error
	if s.root, err = filepath.Abs(cfg.Root); err != nil {
		return nil, &refusal.Error{Path: "root", Message: err.Error()}
	}
	if s.pattern != "" {
		if strings.Contains(s.pattern, "/") {
			return nil, &refusal.Error{Path: "mail_pattern", Message: "matches a message file's name, not a path: write e.g. *.eml"}
		}
		if _, err := path.Match(s.pattern, ""); err != nil {
			return nil, &refusal.Error{Path: "mail_pattern", Message: fmt.Sprintf("%q is not a valid pattern: %v", s.pattern, err)}
		}
	}
	if s.window, err = filewalk.WindowOption(cfg.FileMtimeWindowS); err != nil {
		return nil, err
	}
	if s.probe, err = filewalk.ProbeOption(cfg.FileContentProbe); err != nil {
		return nil, err
	}
	if cfg.ExpectedRecipients != nil {
		if len(cfg.ExpectedRecipients) == 0 {
			return nil, &refusal.Error{Path: "expected_recipients", Message: "is empty: list the addresses the message may go to, or leave the key out"}
		}
		s.expected = map[string]bool{}
		for i, r := range cfg.ExpectedRecipients {
			addr, err := mail.ParseAddress(r)
			if err != nil {
				return nil, &refusal.Error{Path: fmt.Sprintf("expected_recipients[%d]", i), Message: fmt.Sprintf("%q is not an email address: %v", r, err)}
			}
			s.expected[strings.ToLower(addr.Address)] = true
		}
	}
	return s, nil
}

// TestConnection lists the capture point.
func (s *settings) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	start := time.Now()
	box, err := s.open()
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: time.Since(start)}, nil
	}
	defer box.close()
	files, err := box.list(ctx)
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: latency}, nil
	}
	return sdk.TestResult{
		Reachable: true,
		Message:   fmt.Sprintf("%s %s is readable: %d messages match %q", box.layout, s.root, len(files), box.pattern),
		Latency:   latency,
	}, nil
}

// Read reads the messages before the automation acts.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return s.capture(ctx, req, false)
}

// ReadAfter reads them again; its read is what the verdict hook checks.
func (s *settings) ReadAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return s.capture(ctx, req, true)
}

// capture lists the capture point before it answers (a folder that cannot
// be listed is unreachable), then streams one record per message, parsing
// each as it goes. A failure mid-stream aborts the capture: a partial read
// is never judged.
func (s *settings) capture(ctx context.Context, req sdk.CaptureRequest, after bool) (sdk.Capture, error) {
	at := time.Now()
	box, err := s.open()
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	files, err := box.list(ctx)
	if err != nil {
		box.close()
		return sdk.Unreachable("%v", err), nil
	}
	var leaks *leakCollector
	if after && s.expected != nil {
		leaks = &leakCollector{expected: s.expected, selector: req.Selector}
	}
	return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
		defer box.close()
		read := func(f listed) (sdk.Record, error) {
			rec, recipients, err := s.readFile(box, f, at)
			if rec != nil {
				leaks.add(rec, recipients)
			}
			return rec, err
		}
		rel := func(f listed) string { return f.rel }
		if filewalk.Stream(ctx, yield, s.root, "message", files, rel, read) && leaks != nil {
			s.ledger.Put(req.CaptureID, leaks.found)
		}
	}}, nil
}

// readFile returns the record of one message file and its recipients, or
// nil when the file vanished since it was listed (a maildir reader moved
// it) or is not a regular file.
func (s *settings) readFile(box *mailbox, f listed, now time.Time) (sdk.Record, []string, error) {
	file, err := box.root.Open(f.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, filewalk.Unwrap(err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, nil
	}
	rec := sdk.Record{
		"id":    f.id,
		"name":  path.Base(f.rel),
		"path":  filepath.Join(s.root, filepath.FromSlash(f.rel)),
		"mtime": fi.ModTime().UTC().Format(time.RFC3339Nano),
	}
	if s.window > 0 {
		rec["fresh"] = filewalk.Fresh(fi.ModTime(), now, s.window)
	}
	m, err := readMessage(file, s.probe)
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return nil, nil, err // the disk failed, not the message
	}
	if err != nil {
		rec["parseable"] = false
		rec["parse_error"] = err.Error()
		if s.probe != nil {
			rec["body_match"] = false
		}
		return rec, nil, nil
	}
	rec["parseable"] = true
	if len(m.recipients) > 0 {
		rec["to"] = strings.Join(m.recipients, ",")
	}
	if m.hasFrom {
		rec["from"] = m.from
	}
	if m.hasSubject {
		rec["subject"] = m.subject
	}
	if m.messageID != "" {
		rec["message_id"] = m.messageID
	}
	if !m.date.IsZero() {
		rec["date"] = m.date.Format(time.RFC3339)
	}
	if s.probe != nil {
		rec["body_match"] = m.bodyMatch
	}
	return rec, m.recipients, nil
}

// mailbox is an opened capture point.
type mailbox struct {
	root    *os.Root
	layout  string // "maildir" or "folder"
	pattern string
}

// listed is one message file: its path below root and its identity.
type listed struct {
	rel string
	id  string
}

func (m *mailbox) close() { m.root.Close() }

// open opens root and decides its layout: a folder holding cur/ and new/ is
// a maildir (tmp/, where deliveries are still being written, is never
// read); any other folder holds one message per file.
func (s *settings) open() (*mailbox, error) {
	r, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, fmt.Errorf("the capture point %s cannot be opened: %v", s.root, filewalk.Unwrap(err))
	}
	box := &mailbox{root: r, layout: "folder", pattern: defaultFolderPattern}
	cur, err1 := r.Stat("cur")
	nw, err2 := r.Stat("new")
	if err1 == nil && err2 == nil && cur.IsDir() && nw.IsDir() {
		box.layout, box.pattern = "maildir", defaultMaildirPattern
	}
	if s.pattern != "" {
		box.pattern = s.pattern
	}
	return box, nil
}

// list returns the message files in a stable order: new/ then cur/ for a
// maildir, each by name. A maildir message is identified by the unique
// part of its name (before ':'), which survives its move from new/ to
// cur/; a message seen in both during a move is listed once. Hidden files
// are never messages.
func (m *mailbox) list(ctx context.Context) ([]listed, error) {
	dirs := []string{"."}
	if m.layout == "maildir" {
		dirs = []string{"new", "cur"}
	}
	var out []listed
	seen := map[string]bool{}
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entries, err := fs.ReadDir(m.root.FS(), dir)
		if err != nil {
			return nil, fmt.Errorf("the capture point %s cannot be listed: %v", m.root.Name(), filewalk.Unwrap(err))
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, ".") {
				continue
			}
			if ok, _ := path.Match(m.pattern, name); !ok {
				continue
			}
			id := name
			if m.layout == "maildir" {
				id, _, _ = strings.Cut(name, ":")
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, listed{rel: path.Join(dir, name), id: id})
		}
	}
	return out, nil
}

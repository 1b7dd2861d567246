package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/deadline"
	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// DefaultMinSize is file_min_size when the section leaves it out: a
// zero-byte file is not an arrival.
const DefaultMinSize = 1

// defaultTimeout bounds a capture or a preflight whose caller set no
// deadline, so that a hung server can never hang the daemon.
const defaultTimeout = 2 * time.Minute

// config is the adapter's deployment section.
type config struct {
	Root             string       `json:"root"`
	FilePattern      string       `json:"file_pattern"`
	FileMinSize      json.Number  `json:"file_min_size"`
	FileMtimeWindowS json.Number  `json:"file_mtime_window_s"`
	FileContentProbe string       `json:"file_content_probe"`
	SFTP             *sftpSection `json:"sftp"`
}

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	root    string // local: absolute; SFTP: as the server resolves it
	pattern *filewalk.Pattern
	minSize int64
	window  time.Duration // 0: no freshness window, no `fresh` field
	probe   *regexp.Regexp
	sftp    *sftpSettings // nil: a local folder
}

// New returns an unconfigured file adapter, which reads the files that
// arrived in a local folder or on an SFTP server; it is the factory for
// plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks the section, compiles the pattern and the probe, and for
// SFTP loads the host-key trust and the credentials. It does not connect:
// a server that is down or refuses the credentials is the captures'
// business.
func configure(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	s := &settings{minSize: DefaultMinSize}
	var err error
	if s.pattern, err = filewalk.Compile(cfg.FilePattern); err != nil {
		return nil, &refusal.Error{Path: "file_pattern", Message: err.Error()}
	}
	if cfg.FileMinSize != "" {
		n, err := strconv.ParseInt(string(cfg.FileMinSize), 10, 64)
		if err != nil || n < 0 {
			return nil, &refusal.Error{Path: "file_min_size", Message: "must be a whole number of bytes, 0 or more (0 accepts empty files)"}
		}
		s.minSize = n
	}
	if s.window, err = filewalk.WindowOption(cfg.FileMtimeWindowS); err != nil {
		return nil, err
	}
	if s.probe, err = filewalk.ProbeOption(cfg.FileContentProbe); err != nil {
		return nil, err
	}
	if cfg.Root == "" {
		return nil, &refusal.Error{Path: "root", Message: "missing: name the folder where the files land"}
	}
	if cfg.SFTP == nil {
		// A local folder that is missing is an outage the captures report,
		// not a malformed section.
		if s.root, err = filepath.Abs(cfg.Root); err != nil {
			return nil, &refusal.Error{Path: "root", Message: err.Error()}
		}
	} else {
		s.root = path.Clean(cfg.Root)
		if s.sftp, err = configureSFTP(cfg.SFTP, req.Secrets); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// TestConnection opens the folder (connecting and checking the host key and
// the credentials for SFTP) and lists it.
func (s *settings) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	ctx, cancel := withDeadline(ctx, 0)
	defer cancel()
	start := time.Now()
	t, err := s.open(ctx)
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: time.Since(start)}, nil
	}
	defer t.close()
	entries, err := fs.ReadDir(t.fsys, ".")
	latency := time.Since(start)
	t.sound = err == nil
	if err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("%s cannot be listed: %v", t.where, filewalk.Unwrap(t.cause(err))), Latency: latency}, nil
	}
	msg := fmt.Sprintf("%s is readable (%d entries at its top level); files matching %q are read", t.where, len(entries), s.pattern)
	if t.note != "" {
		msg += "; " + t.note
	}
	return sdk.TestResult{Reachable: true, Message: msg, Latency: latency}, nil
}

// Read opens the folder, lists it, and reads every candidate before it
// answers, so that a server that fails anywhere in the read (refused,
// unreachable, gone or hung mid-read) is reported as unreachable and never
// as a shorter list of files.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	ctx, cancel := withDeadline(ctx, req.Timeout)
	defer cancel()
	at := time.Now()
	t, err := s.open(ctx)
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	defer t.close()
	recs, err := s.read(ctx, t, at)
	if err != nil {
		return sdk.Unreachable("%s: %v", t.where, t.cause(err)), nil
	}
	t.sound = true
	return sdk.Capture{Reachable: true, At: at, Records: sdk.Records(recs...)}, nil
}

// withDeadline bounds a read or a preflight by the caller's deadline, which
// ctx carries over the plugin protocol (for a baseline it is longer than
// the capture's Timeout), always a little inside it (deadline.Inside): a
// read that ran to that very instant would answer "unreachable" just as its
// caller stops listening, and on a loaded machine the call then fails
// instead. Without a caller deadline the read is bounded by timeout
// (defaultTimeout when that is 0), so that a hung server can never hang
// the daemon.
func withDeadline(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if d, ok := deadline.Inside(ctx); ok {
		return context.WithDeadline(ctx, d)
	}
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// pastDeadline reports whether ctx ended: cancelled, or at its deadline.
// The connection's own deadline is ctx's, so a read it cut off can return
// a moment before ctx's timer has fired; the clock settles which.
func pastDeadline(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// tree is an opened folder: local or on an SFTP server.
type tree struct {
	fsys  fs.FS
	where string // for reasons: the folder, and the server for SFTP
	note  string // for preflight: what was verified on the way
	// close releases the folder (and the connection, which for SFTP the
	// next read may reuse when this one set sound).
	close func()
	sound bool
	// cause explains an error seen while reading: a deadline or a dropped
	// connection says more than the error of the call it broke.
	cause func(error) error
}

func (s *settings) open(ctx context.Context) (*tree, error) {
	if s.sftp != nil {
		return s.openSFTP(ctx)
	}
	r, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, fmt.Errorf("root %s cannot be opened: %v", s.root, filewalk.Unwrap(err))
	}
	return &tree{
		fsys:  localFS{ctx: ctx, fsys: r.FS()},
		where: "root " + s.root,
		close: func() { r.Close() },
		cause: func(err error) error {
			if pastDeadline(ctx) {
				return errors.New("the read did not finish before its deadline")
			}
			return err
		},
	}, nil
}

// localFS is an os.Root's FS whose files stop reading when the capture's
// deadline passes (a stalled network mount must not hang a capture).
type localFS struct {
	ctx  context.Context
	fsys fs.FS
}

func (l localFS) Open(name string) (fs.File, error) {
	f, err := l.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	return ctxFile{File: f, r: filewalk.Reader(l.ctx, f)}, nil
}

func (l localFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := l.ctx.Err(); err != nil {
		return nil, err
	}
	return fs.ReadDir(l.fsys, name)
}

type ctxFile struct {
	fs.File
	r io.Reader
}

func (c ctxFile) Read(p []byte) (int, error) { return c.r.Read(p) }

// display is the path a record shows for rel.
func (s *settings) display(rel string) string {
	if s.sftp != nil {
		return path.Join(s.root, rel)
	}
	return filepath.Join(s.root, filepath.FromSlash(rel))
}

// jsonInt is n as an exact JSON integer.
func jsonInt(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

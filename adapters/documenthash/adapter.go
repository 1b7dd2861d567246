package documenthash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// DefaultGlob matches every file directly under root.
const DefaultGlob = filewalk.DefaultPattern

type config struct {
	Root string `json:"root"`
	Glob string `json:"glob"`
}

type settings struct {
	root    string // absolute
	pattern *filewalk.Pattern
}

// New returns an unconfigured document-hash adapter, which hashes the
// documents of a store on disk; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks that root is an existing folder and that glob is a valid
// pattern.
func configure(_ context.Context, cfg config, _ sdk.ConfigureRequest) (*settings, error) {
	if cfg.Root == "" {
		return nil, &refusal.Error{Path: "root", Message: "missing: name the folder that holds the documents"}
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, &refusal.Error{Path: "root", Message: err.Error()}
	}
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &refusal.Error{Path: "root", Message: root + " does not exist; name an existing folder"}
	case err != nil:
		return nil, &refusal.Error{Path: "root", Message: err.Error()}
	case !fi.IsDir():
		return nil, &refusal.Error{Path: "root", Message: root + " is not a folder"}
	}
	pattern, err := filewalk.Compile(cfg.Glob)
	if err != nil {
		return nil, &refusal.Error{Path: "glob", Message: err.Error()}
	}
	return &settings{root: root, pattern: pattern}, nil
}

// TestConnection checks that root can be opened and listed.
func (s *settings) TestConnection(_ context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	list := func(fsys fs.FS) (int, error) {
		entries, err := fs.ReadDir(fsys, ".")
		return len(entries), filewalk.Unwrap(err)
	}
	return filewalk.ProbeRoot(s.root, list, func(n int) string {
		return fmt.Sprintf(" (%d entries at its top level); documents matching %q are hashed", n, s.pattern)
	}), nil
}

// Read opens root and streams one record per matching regular file. A
// root that cannot be opened or listed is unreachable; a failure during the
// walk aborts the stream, so a partial listing is never judged.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	at := time.Now()
	r, rootInfo, err := filewalk.OpenListed(s.root, func(r *os.Root) (fs.FileInfo, error) {
		info, err := r.Stat(".")
		if err == nil {
			_, err = fs.ReadDir(r.FS(), ".")
		}
		return info, filewalk.Unwrap(err)
	})
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	deadline := req.Timeout
	return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
		defer r.Close()
		ctx := ctx
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, deadline)
			defer cancel()
		}
		stopped := false
		buf := make([]byte, 64<<10)
		// The listing is complete before any document is hashed: a
		// listing error fails the whole read.
		entries, err := filewalk.Select(ctx, r.FS(), s.pattern)
		for _, e := range entries {
			var rec sdk.Record
			if rec, err = hashFile(ctx, r, e, buf); err != nil {
				break
			}
			if rec != nil && !yield(rec, nil) {
				stopped = true
				break
			}
		}
		if stopped {
			return
		}
		if err == nil {
			// A root moved or deleted during the walk leaves the open
			// folder readable where it went; the read is then not of the
			// configured root.
			if now, serr := os.Stat(s.root); serr != nil || !os.SameFile(now, rootInfo) {
				err = fmt.Errorf("root %s was moved or removed during the read", s.root)
			}
		}
		if err != nil {
			yield(nil, fmt.Errorf("hashing the documents under %s: %w", s.root, err))
		}
	}}, nil
}

// hashFile returns the record of the document at rel, or nil when it is not
// a regular file (a folder, a device, a symlink leading out of root or
// nowhere) or vanished since it was listed.
func hashFile(ctx context.Context, r *os.Root, e filewalk.Entry, buf []byte) (sdk.Record, error) {
	// Root follows a symlink only while it stays inside root, so a link to
	// /etc/passwd is never read.
	f, fi, err := filewalk.OpenRegular(r.FS(), e)
	if err != nil || f == nil {
		return nil, err
	}
	defer f.Close()
	rel := e.Rel
	h := sha256.New()
	// Streamed through a fixed buffer: a document is never read whole.
	n, err := io.CopyBuffer(h, filewalk.Reader(ctx, f), buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return sdk.Record{
		"id":     rel,
		"path":   rel,
		"name":   path.Base(rel),
		"size":   json.Number(strconv.FormatInt(n, 10)),
		"mtime":  fi.ModTime().UTC().Format(time.RFC3339Nano),
		"sha256": hex.EncodeToString(h.Sum(nil)),
	}, nil
}

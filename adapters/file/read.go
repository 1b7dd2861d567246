package file

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/sdk"
)

// readers is how many files are read at once: over SFTP their round trips
// overlap; a local disk is not flooded.
const readers = 8

// bigFile is the size above which a file is read with many requests in
// flight.
const bigFile = 1 << 20

// read lists the candidates and reads each of them, returning their
// records in path order. Any failure fails the whole read.
func (s *settings) read(ctx context.Context, t *tree, now time.Time) ([]sdk.Record, error) {
	entries, err := filewalk.Select(ctx, t.fsys, s.pattern)
	if err != nil {
		return nil, fmt.Errorf("listing the folder: %w", err)
	}
	recs := make([]sdk.Record, len(entries))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(readers, len(entries)) {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for i := range next {
				rec, err := s.readFile(ctx, t.fsys, entries[i], now, buf)
				if err != nil {
					cancel(fmt.Errorf("reading %s: %w", entries[i].Rel, err))
					continue
				}
				recs[i] = rec
			}
		})
	}
feed:
	for i := range entries {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// readFile returns the record of one candidate, or nil when it is not a
// regular file (a folder, a device, a symbolic link leading out of root or
// nowhere) or vanished since it was listed. The file is streamed through
// the hash and the probe, never held whole.
func (s *settings) readFile(ctx context.Context, fsys fs.FS, e filewalk.Entry, now time.Time, buf []byte) (sdk.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A FIFO, socket or device is not a file that arrived.
	f, fi, err := filewalk.OpenRegular(fsys, e)
	if err != nil || f == nil {
		return nil, filewalk.Unwrap(err)
	}
	defer f.Close()
	h := sha256.New()
	var dst io.Writer = h
	var p *probe
	if s.probe != nil {
		p = startProbe(s.probe)
		dst = io.MultiWriter(h, p)
	}
	// A small file is read with plain reads: an SFTP file's WriterTo spends
	// a round trip on a stat of its own first, which costs more than it
	// saves. A large one goes through WriterTo when it has one, for its many
	// reads in flight.
	var src io.Reader = onlyReader{f}
	if fi.Size() > bigFile {
		src = f
	}
	n, err := io.CopyBuffer(dst, src, buf)
	matched := false
	if p != nil {
		matched = p.result(err)
	}
	if err != nil {
		return nil, err
	}
	rec := sdk.Record{
		"id":      e.Rel,
		"name":    path.Base(e.Rel),
		"path":    s.display(e.Rel),
		"size":    jsonInt(n),
		"size_ok": n >= s.minSize,
		"mtime":   fi.ModTime().UTC().Format(time.RFC3339Nano),
		"sha256":  hex.EncodeToString(h.Sum(nil)),
	}
	if s.window > 0 {
		rec["fresh"] = filewalk.Fresh(fi.ModTime(), now, s.window)
	}
	if s.probe != nil {
		rec["content_match"] = matched
	}
	return rec, nil
}

// onlyReader hides every method of a file but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// probe runs a regular expression over bytes written to it, as they are
// written: regexp matches a stream with bounded memory, so a file of any
// size is probed without being held.
type probe struct {
	pw   *io.PipeWriter
	done chan bool
}

func startProbe(re *regexp.Regexp) *probe {
	pr, pw := io.Pipe()
	p := &probe{pw: pw, done: make(chan bool, 1)}
	go func() {
		matched := re.MatchReader(bufio.NewReaderSize(pr, 64<<10))
		// Whatever follows a match is drained, so the writer never blocks.
		_, _ = io.Copy(io.Discard, pr)
		p.done <- matched
	}()
	return p
}

func (p *probe) Write(b []byte) (int, error) { return p.pw.Write(b) }

// result ends the input (with err when the read failed) and reports
// whether the expression matched.
func (p *probe) result(err error) bool {
	p.pw.CloseWithError(err)
	return <-p.done
}

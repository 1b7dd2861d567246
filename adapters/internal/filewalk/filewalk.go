// Package filewalk selects the files under a folder for the adapters that
// read files (file, document): the pattern language of their file_pattern,
// a walk that skips folders the pattern cannot reach, and the freshness rule
// for a file's modification time. It works on any fs.FS, so a local folder
// (os.Root) and an SFTP server are listed the same way.
package filewalk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
)

// DefaultPattern selects every file directly under the root.
const DefaultPattern = "*"

// Pattern is a compiled file_pattern: a path.Match pattern applied to each
// file's slash-separated path relative to the root. '*' never crosses a
// '/', so "*.csv" selects files directly under the root and "*/*.csv" one
// folder level down.
type Pattern struct {
	glob string
	segs []string
}

// Compile checks p and returns it compiled; "" means DefaultPattern.
func Compile(p string) (*Pattern, error) {
	if p == "" {
		p = DefaultPattern
	}
	if strings.HasPrefix(p, "/") {
		return nil, errors.New("must be relative to root, e.g. *.csv or exports/*.csv")
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".", "..":
			return nil, fmt.Errorf("%q has an empty, . or .. segment; write a path below root such as exports/*.csv", p)
		case "**":
			return nil, fmt.Errorf("%q: ** is not supported; * matches within one folder level, so write one level per segment (*/*.csv)", p)
		}
	}
	if _, err := path.Match(p, ""); err != nil {
		return nil, fmt.Errorf("%q is not a valid pattern: %v", p, err)
	}
	return &Pattern{glob: p, segs: strings.Split(p, "/")}, nil
}

// String is the pattern as written (or the default).
func (p *Pattern) String() string { return p.glob }

// Match reports whether the file at rel (slash-separated, relative to the
// root) is selected.
func (p *Pattern) Match(rel string) bool {
	ok, _ := path.Match(p.glob, rel)
	return ok
}

// mayHold reports whether the folder at rel (not ".") can contain a selected
// file: only a folder whose path matches the pattern's leading segments can.
func (p *Pattern) mayHold(rel string) bool {
	depth := strings.Count(rel, "/") + 1
	if depth >= len(p.segs) {
		return false
	}
	ok, _ := path.Match(strings.Join(p.segs[:depth], "/"), rel)
	return ok
}

// Entry is one selected directory entry. It may be a symbolic link or
// something other than a regular file; the caller opens it and decides.
type Entry struct {
	Rel string // slash-separated, relative to the root
	fs.DirEntry
}

// Select walks fsys from "." and returns the entries p selects, in lexical
// order of their paths. Any listing error fails the whole walk: a partial
// listing must never pass for the folder's contents.
func Select(ctx context.Context, fsys fs.FS, p *Pattern) ([]Entry, error) {
	var out []Entry
	err := fs.WalkDir(fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && !p.mayHold(rel) {
				return fs.SkipDir
			}
			return nil
		}
		if p.Match(rel) {
			out = append(out, Entry{Rel: rel, DirEntry: d})
		}
		return nil
	})
	return out, err
}

// OpenRegular opens a listed entry for reading. It returns no file and no
// error when the entry is not a regular file: a FIFO, socket or device as
// listed (opening one can block or never end), a folder, a symbolic link
// leading out of the root or nowhere, or a file that vanished since it was
// listed. The caller closes the file.
func OpenRegular(fsys fs.FS, e Entry) (fs.File, fs.FileInfo, error) {
	if e.Type()&^fs.ModeSymlink != 0 {
		return nil, nil, nil
	}
	f, err := fsys.Open(e.Rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || e.Type()&fs.ModeSymlink != 0 {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, nil
	}
	return f, fi, nil
}

// Fresh reports whether a modification time is within window of now, on
// either side: a file stamped further in the future than the window is as
// suspect as an old one. An age exactly equal to the window is fresh (the
// judge's freshness rule).
func Fresh(mtime, now time.Time, window time.Duration) bool {
	age := now.Sub(mtime)
	return age <= window && age >= -window
}

// MaxWindow bounds file_mtime_window_s: a year and a day.
const MaxWindow = 366 * 24 * time.Hour

// ParseWindow reads a file_mtime_window_s value: a number of seconds above
// zero, at most MaxWindow.
func ParseWindow(n json.Number) (time.Duration, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > MaxWindow.Seconds() {
		return 0, fmt.Errorf("must be a number of seconds above 0 and at most %d (a year and a day), e.g. 300", int(MaxWindow.Seconds()))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// Reader returns r cut off when ctx ends: each Read first checks ctx, so a
// long read stops at the capture's deadline.
func Reader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx: ctx, r: r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Unwrap drops the *fs.PathError wrapper, whose path repeats what a reason
// already names.
func Unwrap(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

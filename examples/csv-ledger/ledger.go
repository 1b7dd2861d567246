package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// kind is the name deployments use in `kind:`.
const kind = "csv-ledger"

// ReasonClockSkew is the reason code of the verdict hook's demotion.
const ReasonClockSkew = "LEDGER_CLOCK_SKEW"

// section is what the daemon sends (sdk.Section): the deployment's
// section with `kind` and the plugin's `options`, option_params bound and
// merged in. The daemon keeps its own keys (freshness_field, secret_env,
// ...) and sends a secret_env secret apart, in ConfigureRequest.Secrets
// (read with req.Secret); the ledger has none. Options is a pointer so that
// a section without options: is told apart from one with empty options.
type section = sdk.Section[*options]

type options struct {
	Path     string `json:"path"`
	IDColumn string `json:"id_column"`
}

// settings is what Configure resolved, and the reads the verdict hook
// looks back at.
type settings struct {
	path     string
	idColumn string
	reads    *sdk.ReadLog[readStamp] // by capture id
}

// readStamp is what the verdict hook needs to know about one read.
type readStamp struct {
	at    time.Time // when the read was taken
	mtime time.Time // the ledger's modification time as the read saw it
}

// maxRemembered bounds the reads the verdict hook remembers; a verdict for
// an older read is left as it is.
const maxRemembered = 1024

// newLedger is the adapter's factory. sdk.Define makes an adapter of its
// Info and of configure, which resolves the section into the settings
// every later call reads: it answers Info, holds the settings (safely for
// concurrent captures), answers both captures with the settings' one
// fresh Read, and passes on their verdict hook.
var newLedger = sdk.Define(sdk.Info{
	Kind: kind,
	// The ledger file is the system of record itself.
	Tier:        sdk.TierIndependentSystem,
	Description: "rows of a CSV ledger file, one record per row",
}, configure)

var _ sdk.VerdictHook = (*settings)(nil)

// configure receives the section already decoded by the SDK's strict
// decoder, which refuses a misspelt key at any depth, naming it.
func configure(_ context.Context, sec section, _ sdk.ConfigureRequest) (*settings, error) {
	if sec.Options == nil {
		return nil, &refusal.Error{Path: "options", Message: "missing: write options: {path: /path/to/ledger.csv}"}
	}
	opts := *sec.Options
	if opts.Path == "" {
		return nil, &refusal.Error{Path: "options.path", Message: "missing: name the CSV ledger file"}
	}
	if !filepath.IsAbs(opts.Path) {
		// The daemon starts plugins in its own working folder, which an
		// operator should not have to guess.
		return nil, &refusal.Error{Path: "options.path", Message: fmt.Sprintf("%q is relative; write an absolute path", opts.Path)}
	}
	if opts.IDColumn == "" {
		opts.IDColumn = "id"
	}
	return &settings{path: opts.Path, idColumn: opts.IDColumn, reads: &sdk.ReadLog[readStamp]{Size: maxRemembered}}, nil
}

func (s *settings) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	start := time.Now()
	f, _, header, err := s.open()
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: time.Since(start)}, nil //nolint:nilerr // an unreadable ledger is an unreachable result, not a fault
	}
	f.Close()
	return sdk.TestResult{
		Reachable: true,
		Message:   fmt.Sprintf("%s is readable; columns %s", s.path, strings.Join(header, ", ")),
		Latency:   time.Since(start),
	}, nil
}

// Read streams the ledger's rows. A ledger that cannot be opened or has
// no usable header is unreachable (data, not an error); a malformed row
// later aborts the stream, so the daemon never judges part of the file.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	f, r, header, err := s.open()
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return sdk.Unreachable("%s: %v", s.path, err), nil
	}
	// The read's time is taken after the file's metadata: a write landing
	// between the two can then never look like a clock running ahead.
	at := time.Now()
	s.reads.Put(req.CaptureID, readStamp{at: at, mtime: fi.ModTime()})

	return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
		defer f.Close()
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			row, err := r.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, fmt.Errorf("%s: %w", s.path, err))
				return
			}
			rec := make(sdk.Record, len(header))
			for i, col := range header {
				rec[col] = row[i]
			}
			if !yield(rec, nil) {
				return
			}
		}
	}}, nil
}

// open opens the ledger and reads its header row.
func (s *settings) open() (*os.File, *csv.Reader, []string, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the ledger cannot be opened: %w", err)
	}
	r := csv.NewReader(f)
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			return nil, nil, nil, fmt.Errorf("%s is empty: a ledger starts with a header row", s.path)
		}
		return nil, nil, nil, fmt.Errorf("%s: the header row cannot be read: %w", s.path, err)
	}
	header = append([]string(nil), header...) // ReuseRecord would overwrite it
	seen := map[string]bool{}
	for _, col := range header {
		if seen[col] {
			f.Close()
			return nil, nil, nil, fmt.Errorf("%s: the header names column %q twice", s.path, col)
		}
		seen[col] = true
	}
	if !seen[s.idColumn] {
		f.Close()
		return nil, nil, nil, fmt.Errorf("%s has no %q column (id_column); its columns are %s", s.path, s.idColumn, strings.Join(header, ", "))
	}
	return f, r, header, nil
}

// Verdict demotes a CONFIRMED verdict when the ledger the judged read came
// from was modified "after" the read: the machine that wrote it has a
// clock ahead of this one, so freshness and ordering drawn from the ledger
// cannot be trusted. It never touches REFUTED or INDETERMINATE, and the
// daemon would ignore a promotion anyway.
func (s *settings) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	if req.Verdict != sdk.VerdictConfirmed {
		return sdk.Demotion{}, nil
	}
	read, ok := s.reads.Get(req.CaptureID)
	if !ok || !read.mtime.After(read.at) {
		return sdk.Demotion{}, nil
	}
	return sdk.Demotion{
		Verdict:    sdk.VerdictIndeterminate,
		ReasonCode: ReasonClockSkew,
		Message: fmt.Sprintf("the ledger was last modified at %s, %s after it was read at %s: the writer's clock is ahead, so the read cannot be placed in time; fix the clock (NTP) and verify again",
			read.mtime.UTC().Format(time.RFC3339Nano), read.mtime.Sub(read.at).Round(time.Millisecond), read.at.UTC().Format(time.RFC3339Nano)),
	}, nil
}

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
)

// kind is the name deployments use in `kind:`.
const kind = "csv-ledger"

// ReasonClockSkew is the reason code of the verdict hook's demotion.
const ReasonClockSkew = "LEDGER_CLOCK_SKEW"

// section is what the daemon sends: the deployment's section with `kind`
// and the resolved plugin `options` (secret_env is resolved into
// ConfigureRequest.Secrets and removed).
type section struct {
	Kind    string   `json:"kind"`
	Options *options `json:"options"`
}

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

// ledger reads one CSV file. sdk.Base answers Info, holds the settings
// (safely for concurrent captures) and answers both captures with one
// fresh read.
type ledger struct{ sdk.Base[settings] }

var _ sdk.VerdictHook = (*ledger)(nil)

func newLedger() sdk.Adapter {
	return &ledger{sdk.Base[settings]{
		About: sdk.Info{
			Kind: kind,
			// The ledger file is the system of record itself.
			Tier:        sdk.TierIndependentSystem,
			Description: "rows of a CSV ledger file, one record per row",
		},
		Read: (*settings).capture,
	}}
}

func (l *ledger) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	// The SDK's decoder refuses a misspelt key at any depth, naming it.
	var sec section
	if err := req.DecodeConfig(&sec); err != nil {
		return err
	}
	if sec.Options == nil {
		return &sdk.ConfigError{Path: "options", Message: "missing: write options: {path: /path/to/ledger.csv}"}
	}
	opts := *sec.Options
	if opts.Path == "" {
		return &sdk.ConfigError{Path: "options.path", Message: "missing: name the CSV ledger file"}
	}
	if !filepath.IsAbs(opts.Path) {
		// The daemon starts plugins in its own working folder, which an
		// operator should not have to guess.
		return &sdk.ConfigError{Path: "options.path", Message: fmt.Sprintf("%q is relative; write an absolute path", opts.Path)}
	}
	if opts.IDColumn == "" {
		opts.IDColumn = "id"
	}
	l.Store(&settings{path: opts.Path, idColumn: opts.IDColumn, reads: &sdk.ReadLog[readStamp]{Size: maxRemembered}})
	return nil
}

func (l *ledger) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	s, err := l.Load()
	if err != nil {
		return sdk.TestResult{}, err
	}
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

// capture streams the ledger's rows. A ledger that cannot be opened or has
// no usable header is unreachable (data, not an error); a malformed row
// later aborts the stream, so the daemon never judges part of the file.
func (s *settings) capture(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
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
func (l *ledger) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	cfg, err := l.Load()
	if err != nil || req.Verdict != sdk.VerdictConfirmed {
		return sdk.Demotion{}, err
	}
	s, ok := cfg.reads.Get(req.CaptureID)
	if !ok || !s.mtime.After(s.at) {
		return sdk.Demotion{}, nil
	}
	return sdk.Demotion{
		Verdict:    sdk.VerdictIndeterminate,
		ReasonCode: ReasonClockSkew,
		Message: fmt.Sprintf("the ledger was last modified at %s, %s after it was read at %s: the writer's clock is ahead, so the read cannot be placed in time; fix the clock (NTP) and verify again",
			s.mtime.UTC().Format(time.RFC3339Nano), s.mtime.Sub(s.at).Round(time.Millisecond), s.at.UTC().Format(time.RFC3339Nano)),
	}, nil
}

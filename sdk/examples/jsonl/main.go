// Command verifier-adapter-jsonl is the smallest complete adapter: it reads
// a JSON-lines file, one record per line, and it is built against the SDK
// module alone (github.com/verifierd/verifierd/sdk), as a customer's
// adapter is:
//
//	go build -o /etc/verifierd/plugins/verifier-adapter-jsonl .
//
// A deployment reads it as
//
//	effects:
//	  kind: jsonl
//	  options:
//	    path: /srv/outbox/orders.jsonl   # absolute: the daemon starts plugins with an empty environment
//
// A missing or unreadable file is an unreachable read (INDETERMINATE, never
// "no records"); a line that is not a JSON object fails the capture, so the
// daemon never judges part of the file. The fuller customer example, with
// the qualification kit and a verdict hook, is examples/csv-ledger in the
// repository.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func main() { plugin.Main(New) }

// New is the adapter's factory: sdk.Define answers Info, decodes the
// section strictly into section, and answers both captures with Read.
var New = sdk.Define(sdk.Info{
	Kind:        "jsonl",
	Tier:        sdk.TierIndependentSystem,
	Description: "records of a JSON-lines file, one per line",
}, configure)

type section struct {
	Kind    string `json:"kind"`
	Options *struct {
		Path string `json:"path"`
	} `json:"options"`
}

// file is what configure resolved: the file every read opens afresh.
type file struct{ path string }

func configure(_ context.Context, sec section, _ sdk.ConfigureRequest) (*file, error) {
	switch {
	case sec.Options == nil || sec.Options.Path == "":
		return nil, &refusal.Error{Path: "options.path", Message: "missing: name the JSON-lines file to read"}
	case !filepath.IsAbs(sec.Options.Path):
		return nil, &refusal.Error{Path: "options.path", Message: "write an absolute path: the daemon starts plugins in a folder of its own"}
	}
	return &file{path: sec.Options.Path}, nil
}

// TestConnection opens the file.
func (f *file) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return sdk.TestResult{Message: err.Error()}, nil //nolint:nilerr // an unreadable file is an unreachable result, not a fault
	}
	fh.Close()
	return sdk.TestResult{Reachable: true, Message: "opened " + f.path}, nil
}

// Read streams one record per line; blank lines are skipped. A line whose
// field a contract selects on or reads holds a list (several values where
// the contract compares one) fails the read, naming the line and the field:
// dropping or flattening it would hide the record (sdk.ShapeError).
func (f *file) Read(_ context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return sdk.Unreachable("cannot open %s: %v", f.path, err), nil
	}
	records := func(yield func(sdk.Record, error) bool) {
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var rec sdk.Record
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.UseNumber()
			if err := dec.Decode(&rec); err != nil || rec == nil {
				yield(nil, fmt.Errorf("%s line %d: not a JSON object", f.path, n))
				return
			}
			if err := shaped(req, rec, fmt.Sprintf("%s line %d", f.path, n)); err != nil {
				yield(nil, err)
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, fmt.Errorf("reading %s: %w", f.path, err))
		}
	}
	return sdk.Capture{Reachable: true, Records: records}, nil
}

// shaped is the shaping rule for one record: a list in a field a contract
// reads holds its one value (an empty one, none: the field is absent), and
// several values are a *sdk.ShapeError; a list in any other field is kept
// as it is.
func shaped(req sdk.CaptureRequest, rec sdk.Record, where string) error {
	for field, v := range rec {
		list, isList := v.([]any)
		if !isList || !req.Reads(field) {
			continue
		}
		one, ok, err := sdk.SingleValue(where, field, list)
		switch {
		case err != nil:
			return err
		case !ok:
			delete(rec, field)
		default:
			rec[field] = one
		}
	}
	return nil
}

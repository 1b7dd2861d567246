package document

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/internal/httpx"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// The two document formats.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// reserved are the fields the adapter sets itself; parsed fields cannot
// take these names.
var reserved = map[string]bool{
	"id": true, "name": true, "path": true, "size": true, "mtime": true,
	"fresh": true, "parseable": true, "parse_error": true,
}

type config struct {
	Root                string            `json:"root"`
	FilePattern         string            `json:"file_pattern"`
	DocumentFormat      string            `json:"document_format"`
	DocumentFieldPaths  map[string]string `json:"document_field_paths"`
	DocumentTextPattern string            `json:"document_text_pattern"`
	FileMtimeWindowS    json.Number       `json:"file_mtime_window_s"`
}

type settings struct {
	root    string // absolute
	pattern *filewalk.Pattern
	format  string
	fields  []fieldPath // json: in field order; nil maps the top-level keys
	text    *regexp.Regexp
	window  time.Duration
}

// fieldPath maps a record field to a dotted path into a JSON document.
type fieldPath struct {
	field string
	path  httpx.Path
}

// New returns an unconfigured document adapter, which reads the documents
// (reports, exports, confirmations) written to a folder and parses each
// into a record; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// configure checks the section and compiles the parsing rules. It does not
// look at the folder, whose absence is an outage the captures report.
func configure(_ context.Context, cfg config, _ sdk.ConfigureRequest) (*settings, error) {
	if cfg.Root == "" {
		return nil, &refusal.Error{Path: "root", Message: "missing: name the folder the documents are written to"}
	}
	s := &settings{format: strings.ToLower(cfg.DocumentFormat)}
	var err error
	if s.root, err = filepath.Abs(cfg.Root); err != nil {
		return nil, &refusal.Error{Path: "root", Message: err.Error()}
	}
	if s.pattern, err = filewalk.Compile(cfg.FilePattern); err != nil {
		return nil, &refusal.Error{Path: "file_pattern", Message: err.Error()}
	}
	if s.window, err = filewalk.WindowOption(cfg.FileMtimeWindowS); err != nil {
		return nil, err
	}
	switch s.format {
	case "", FormatJSON:
		s.format = FormatJSON
		if cfg.DocumentTextPattern != "" {
			return nil, &refusal.Error{Path: "document_text_pattern", Message: "is read with document_format: text; a JSON document is mapped with document_field_paths"}
		}
		if s.fields, err = compileFieldPaths(cfg.DocumentFieldPaths); err != nil {
			return nil, err
		}
	case FormatText:
		if cfg.DocumentFieldPaths != nil {
			return nil, &refusal.Error{Path: "document_field_paths", Message: "is read with document_format: json; a text document is mapped with the named groups of document_text_pattern"}
		}
		if s.text, err = compileTextPattern(cfg.DocumentTextPattern); err != nil {
			return nil, err
		}
	default:
		return nil, &refusal.Error{Path: "document_format", Message: fmt.Sprintf("%q is not a format: write json or text", cfg.DocumentFormat)}
	}
	return s, nil
}

func compileFieldPaths(m map[string]string) ([]fieldPath, error) {
	if m == nil {
		return nil, nil
	}
	if len(m) == 0 {
		return nil, &refusal.Error{Path: "document_field_paths", Message: "is empty: map record fields to dotted paths (order: order.id), or leave it out to read the top-level keys"}
	}
	out := make([]fieldPath, 0, len(m))
	for _, field := range slices.Sorted(maps.Keys(m)) {
		p := "document_field_paths." + field
		if field == "" {
			return nil, &refusal.Error{Path: "document_field_paths", Message: "a record field name is empty"}
		}
		if reserved[field] {
			return nil, &refusal.Error{Path: p, Message: fmt.Sprintf("%q is a field the adapter sets itself (%s); choose another name", field, reservedList())}
		}
		segs := strings.Split(m[field], ".")
		if slices.Contains(segs, "") {
			return nil, &refusal.Error{Path: p, Message: fmt.Sprintf("%q is not a dotted path: write keys and array indexes joined by dots, e.g. items.0.sku", m[field])}
		}
		out = append(out, fieldPath{field: field, path: httpx.Path(segs)})
	}
	return out, nil
}

func compileTextPattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, &refusal.Error{Path: "document_text_pattern", Message: `missing: document_format text needs a regular expression whose named groups become fields, e.g. "Order (?P<order>\\d+) total (?P<total>[0-9.]+)"`}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, &refusal.Error{Path: "document_text_pattern", Message: "not a valid regular expression (Go RE2 syntax): " + err.Error()}
	}
	seen := map[string]bool{}
	for _, name := range re.SubexpNames() {
		switch {
		case name == "":
			continue
		case reserved[name]:
			return nil, &refusal.Error{Path: "document_text_pattern", Message: fmt.Sprintf("the group name %q is a field the adapter sets itself (%s); choose another name", name, reservedList())}
		case seen[name]:
			return nil, &refusal.Error{Path: "document_text_pattern", Message: fmt.Sprintf("the group name %q is used twice; each field needs one group", name)}
		}
		seen[name] = true
	}
	if len(seen) == 0 {
		return nil, &refusal.Error{Path: "document_text_pattern", Message: "has no named group: write (?P<field>...) for every value the record should carry"}
	}
	return re, nil
}

func reservedList() string {
	return strings.Join(slices.Sorted(maps.Keys(reserved)), ", ")
}

// TestConnection opens and lists the folder.
func (s *settings) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	list := func(fsys fs.FS) (int, error) {
		entries, err := filewalk.Select(ctx, fsys, s.pattern)
		return len(entries), err
	}
	return filewalk.ProbeRoot(s.root, list, func(n int) string {
		return fmt.Sprintf(": %d documents match %q and are read as %s", n, s.pattern, s.format)
	}), nil
}

// Read lists the folder before it answers (a folder that cannot be
// listed is unreachable), then streams one record per document, parsing
// each as it goes. A document that does not parse is a record too, never
// skipped; a failure to read one aborts the capture.
func (s *settings) Read(ctx context.Context, _ sdk.CaptureRequest) (sdk.Capture, error) {
	at := time.Now()
	r, entries, err := filewalk.OpenListed(s.root, func(r *os.Root) ([]filewalk.Entry, error) {
		return filewalk.Select(ctx, r.FS(), s.pattern)
	})
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
		defer r.Close()
		rel := func(e filewalk.Entry) string { return e.Rel }
		filewalk.Stream(ctx, yield, s.root, "document", entries, rel, func(e filewalk.Entry) (sdk.Record, error) {
			return s.readDocument(ctx, r, e, at)
		})
	}}, nil
}

// readDocument returns the record of one document, or nil when it is not
// a regular file (a folder, a device, a symbolic link leading out of root
// or nowhere) or vanished since it was listed.
func (s *settings) readDocument(ctx context.Context, r *os.Root, e filewalk.Entry, now time.Time) (sdk.Record, error) {
	f, fi, err := filewalk.OpenRegular(r.FS(), e)
	if err != nil || f == nil {
		return nil, filewalk.Unwrap(err)
	}
	defer f.Close()
	rec := sdk.Record{
		"id":    e.Rel,
		"name":  path.Base(e.Rel),
		"path":  filepath.Join(s.root, filepath.FromSlash(e.Rel)),
		"size":  json.Number(strconv.FormatInt(fi.Size(), 10)),
		"mtime": fi.ModTime().UTC().Format(time.RFC3339Nano),
	}
	if s.window > 0 {
		rec["fresh"] = filewalk.Fresh(fi.ModTime(), now, s.window)
	}
	data, tooBig, err := readCapped(filewalk.Reader(ctx, f))
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	var parseErr error
	switch {
	case tooBig:
		parseErr = fmt.Errorf("larger than the %d MiB a document may be to be parsed", maxDocumentBytes>>20)
	case s.format == FormatJSON:
		fields, parseErr = s.parseJSON(data)
	default:
		fields, parseErr = s.parseText(data)
	}
	if parseErr != nil {
		rec["parseable"] = false
		rec["parse_error"] = parseErr.Error()
		return rec, nil
	}
	rec["parseable"] = true
	maps.Copy(rec, fields)
	return rec, nil
}

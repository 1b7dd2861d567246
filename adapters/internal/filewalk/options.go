package filewalk

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// WindowOption reads a section's file_mtime_window_s: 0 (no freshness
// check) when it is absent, else ParseWindow's duration. A refusal is a
// *refusal.Error at file_mtime_window_s.
func WindowOption(n json.Number) (time.Duration, error) {
	if n == "" {
		return 0, nil
	}
	d, err := ParseWindow(n)
	if err != nil {
		return 0, &refusal.Error{Path: "file_mtime_window_s", Message: err.Error()}
	}
	return d, nil
}

// ProbeOption compiles a section's file_content_probe: nil (no probe) when
// it is absent. A refusal is a *refusal.Error at file_content_probe.
func ProbeOption(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, &refusal.Error{Path: "file_content_probe", Message: "not a valid regular expression (Go RE2 syntax): " + err.Error()}
	}
	return re, nil
}

// OpenListed opens root and lists it with list, for an adapter's read or
// preflight. A root that cannot be opened or listed is an error saying so,
// "root <root> cannot be opened: …" or "root <root> cannot be listed: …",
// with the root closed again; otherwise the caller closes the open root.
func OpenListed[T any](root string, list func(*os.Root) (T, error)) (*os.Root, T, error) {
	var zero T
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, zero, fmt.Errorf("root %s cannot be opened: %v", root, Unwrap(err))
	}
	listed, err := list(r)
	if err != nil {
		r.Close()
		return nil, zero, fmt.Errorf("root %s cannot be listed: %v", root, err)
	}
	return r, listed, nil
}

// ProbeRoot is the preflight of an adapter that reads a local folder: it
// opens root and lists it with list, which counts what it found. A root
// that cannot be opened or listed is an unreachable result saying so
// (OpenListed); otherwise the message is "root <root> is readable"
// followed by describe(count).
func ProbeRoot(root string, list func(fs.FS) (int, error), describe func(count int) string) sdk.TestResult {
	start := time.Now()
	r, n, err := OpenListed(root, func(r *os.Root) (int, error) { return list(r.FS()) })
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: latency}
	}
	r.Close()
	return sdk.TestResult{Reachable: true, Message: fmt.Sprintf("root %s is readable%s", root, describe(n)), Latency: latency}
}

// Stream yields the record of each listed file, in the listing's order,
// into a capture's record stream (yield): read returns a file's record, or
// nil to pass over it (it vanished since it was listed, or is not a regular
// file). ctx is checked before each file. noun is what one file is
// ("document") and rel a file's path below root, for the errors: a capture
// whose ctx ended yields "reading the <noun>s under <root>: <cause>", a
// file that fails to read "reading <noun> <rel>: <cause>". Either ends the
// stream, as does a consumer that stops taking records; Stream reports
// whether every file was read and its record taken.
func Stream[F any](ctx context.Context, yield func(sdk.Record, error) bool, root, noun string, files []F, rel func(F) string, read func(F) (sdk.Record, error)) bool {
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			yield(nil, fmt.Errorf("reading the %ss under %s: %w", noun, root, err))
			return false
		}
		rec, err := read(f)
		if err != nil {
			yield(nil, fmt.Errorf("reading %s %s: %w", noun, rel(f), err))
			return false
		}
		if rec != nil && !yield(rec, nil) {
			return false
		}
	}
	return true
}

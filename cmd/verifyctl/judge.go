package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/verifierd/verifierd/judge/harness"
)

// maxCaseBytes bounds a case read from a file or stdin.
const maxCaseBytes = 512 << 20

func cmdJudge(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("judge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	casePath := fs.String("case", "", "case file to judge, or - for stdin")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *casePath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: verifyctl judge --case FILE|-")
		return 2
	}
	var r = stdin
	// The case is read into a string once, sized from the file when there
	// is one: the fast decoder keeps substrings of it, with no second copy.
	var buf strings.Builder
	if *casePath != "-" {
		f, err := os.Open(*casePath)
		if err != nil {
			return refuseCase(stdout, fmt.Sprintf("cannot read the case file: %v", err))
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= maxCaseBytes {
			buf.Grow(int(st.Size()) + 1)
		}
		r = f
	}
	if _, err := io.Copy(&buf, io.LimitReader(r, maxCaseBytes+1)); err != nil {
		return refuseCase(stdout, fmt.Sprintf("cannot read the case: %v", err))
	}
	if buf.Len() > maxCaseBytes {
		return refuseCase(stdout, fmt.Sprintf("the case is larger than %d bytes", maxCaseBytes))
	}
	out, code := harness.RunString(buf.String(), time.Now().UTC())
	if _, err := stdout.Write(out); err != nil {
		return exitFailure
	}
	return code
}

func refuseCase(stdout io.Writer, msg string) int {
	fmt.Fprintf(stdout, "{\"error\": {\"code\": \"INVALID_CASE\", \"message\": %q, \"path\": \"\"}}\n", msg)
	return harness.ExitRefused
}

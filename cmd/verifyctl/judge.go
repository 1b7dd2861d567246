package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/verifierd/verifierd/judge"
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
	// The case is held as one string: the fast decoder keeps spans of it.
	// A regular file is mapped (no copy); anything else is read, sized from
	// the file when there is one.
	var buf strings.Builder
	if *casePath != "-" {
		f, err := os.Open(*casePath)
		if err != nil {
			return refuseCase(stdout, fmt.Sprintf("cannot read the case file: %v", err))
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if st.Size() > maxCaseBytes {
				return refuseCase(stdout, fmt.Sprintf("the case is larger than %d bytes", maxCaseBytes))
			}
			if text, ok := mapCase(f, st.Size()); ok {
				return writeJudged(stdout, text)
			}
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
	return writeJudged(stdout, buf.String())
}

func writeJudged(stdout io.Writer, input string) int {
	out, code := harness.RunOptions(input, time.Now().UTC(), judge.Options{Arena: judgeArena})
	if _, err := stdout.Write(out); err != nil {
		return exitFailure
	}
	return code
}

func refuseCase(stdout io.Writer, msg string) int {
	fmt.Fprintf(stdout, "{\"error\": {\"code\": \"INVALID_CASE\", \"message\": %q, \"path\": \"\"}}\n", msg)
	return harness.ExitRefused
}

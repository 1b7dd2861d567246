package main

import (
	"flag"
	"fmt"
	"io"
	"os"
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
	if *casePath != "-" {
		f, err := os.Open(*casePath)
		if err != nil {
			return refuseCase(stdout, fmt.Sprintf("cannot read the case file: %v", err))
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxCaseBytes+1))
	if err != nil {
		return refuseCase(stdout, fmt.Sprintf("cannot read the case: %v", err))
	}
	if len(data) > maxCaseBytes {
		return refuseCase(stdout, fmt.Sprintf("the case is larger than %d bytes", maxCaseBytes))
	}
	out, code := harness.Run(data, time.Now().UTC())
	if _, err := stdout.Write(out); err != nil {
		return exitFailure
	}
	return code
}

func refuseCase(stdout io.Writer, msg string) int {
	fmt.Fprintf(stdout, "{\"error\": {\"code\": \"INVALID_CASE\", \"message\": %q, \"path\": \"\"}}\n", msg)
	return harness.ExitRefused
}

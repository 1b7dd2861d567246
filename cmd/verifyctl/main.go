// Command verifyctl is the verifierd command-line client. Today it runs the
// judge conformance harness: `verifyctl judge --case FILE|-`.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: verifyctl <command> [flags]

commands:
  judge --case FILE|-   judge one conformance case (JUDGE.md §8) with no substrate
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "judge":
		return cmdJudge(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "verifyctl: unknown command %q\n%s", args[0], usage)
	return 2
}

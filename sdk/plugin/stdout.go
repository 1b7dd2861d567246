package plugin

import (
	"bufio"
	"io"
	"os"
)

// guardStdout makes sure that the only bytes an adapter ever puts on its
// real stdout are go-plugin's handshake line, which the daemon parses. File
// descriptor 1 is pointed at a pipe; a goroutine forwards the handshake line
// to the real stdout and then closes it, and sends everything else (a stray
// fmt.Println in adapter code, a library logging to stdout, a child process)
// to stderr, where the daemon logs it instead of misreading it.
//
// After the handshake go-plugin also swaps the os.Stdout variable for its own
// stdio stream; the daemon's client logs that stream like stderr too.
//
// Output written before Serve runs (package init) cannot be guarded.
func guardStdout() {
	orig, pipe, err := redirectStdout()
	if err != nil {
		// Not fatal: the adapter still works while nothing prints.
		_, _ = os.Stderr.WriteString("verifierd sdk: stdout guard unavailable: " + err.Error() + "\n")
		return
	}
	go forwardStdout(pipe, orig, os.Stderr)
}

// forwardStdout copies what the process writes to fd 1: the handshake line
// to handshake (then closes it), the rest to rest.
func forwardStdout(from io.Reader, handshake io.WriteCloser, rest io.Writer) {
	r := bufio.NewReader(from)
	for {
		line, err := r.ReadString('\n')
		if i := isHandshake(line); i >= 0 {
			if i > 0 {
				// Stray text printed without a newline right before the
				// handshake: keep it off the protocol stream.
				io.WriteString(rest, line[:i]+"\n")
			}
			io.WriteString(handshake, line[i:])
			handshake.Close()
			_, _ = io.Copy(rest, r)
			return
		}
		if line != "" {
			io.WriteString(rest, line)
		}
		if err != nil {
			return
		}
	}
}

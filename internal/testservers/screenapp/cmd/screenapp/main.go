// Command screenapp serves the onscreen tests' GUI-only application on
// loopback for tests that run it as a process (the end-to-end tests). It
// prints one line, "screenapp listening on http://127.0.0.1:PORT", and
// serves until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
)

func main() {
	mode := flag.String("mode", screenapp.Honest, "how saves behave: honest, optimistic or wrong")
	flag.Parse()
	s, err := screenapp.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "screenapp:", err)
		os.Exit(1)
	}
	s.SetMode(*mode)
	fmt.Println("screenapp listening on " + s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
}

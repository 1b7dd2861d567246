// Command recordapp serves the ui_readback tests' record application on
// loopback for tests that run it as a process (the end-to-end tests). It
// prints one line, "recordapp listening on http://127.0.0.1:PORT", and
// serves until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	s, err := recordapp.Start(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recordapp:", err)
		os.Exit(1)
	}
	fmt.Println("recordapp listening on " + s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
}

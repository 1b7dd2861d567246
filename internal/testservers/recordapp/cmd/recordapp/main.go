// Command recordapp serves the ui_readback tests' record application on
// loopback for tests that run it as a process (the end-to-end tests). It
// prints one line, "recordapp listening on http://127.0.0.1:PORT", and
// serves until SIGINT or SIGTERM.
package main

import (
	"flag"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/internal/testservers/webapp"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	webapp.Main("recordapp", func() (*webapp.Server, error) {
		s, err := recordapp.Start(*addr)
		if err != nil {
			return nil, err
		}
		return s.Server, nil
	})
}

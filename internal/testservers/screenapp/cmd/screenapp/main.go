// Command screenapp serves the onscreen tests' GUI-only application on
// loopback for tests that run it as a process (the end-to-end tests). It
// prints one line, "screenapp listening on http://127.0.0.1:PORT", and
// serves until SIGINT or SIGTERM.
package main

import (
	"flag"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/internal/testservers/webapp"
)

func main() {
	mode := flag.String("mode", screenapp.Honest, "how saves behave: honest, optimistic, wrong or duplicate")
	token := flag.Int("token", screenapp.TokenOff, "record pages renew a session token by POST as they load: 0 no, 1 yes, 2 yes and post a notice too")
	flag.Parse()
	webapp.Main("screenapp", func() (*webapp.Server, error) {
		s, err := screenapp.Start()
		if err != nil {
			return nil, err
		}
		s.SetMode(*mode)
		s.SetTokenRefresh(*token)
		return s.Server, nil
	})
}

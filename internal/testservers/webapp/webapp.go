// Package webapp is what the browser-facing test applications (screenapp
// for the onscreen tests, recordapp for the ui_readback tests) share: a
// route table served behind an outage switch, on loopback, and the command
// that runs an application as a process for the end-to-end tests.
package webapp

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Routes is an application's route table: ServeMux patterns
// ("GET /records/{ref}") and their handlers.
type Routes map[string]http.HandlerFunc

// Mux serves the table.
func (rs Routes) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	for pattern, h := range rs {
		mux.HandleFunc(pattern, h)
	}
	return mux
}

// Gate serves next while down reports false. While it reports true, the
// application is out: every request is answered 503 Service Unavailable
// with message, as an application down for maintenance.
func Gate(down func() bool, message string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down() {
			http.Error(w, message, http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Server is a handler served on loopback.
type Server struct {
	URL string // http://127.0.0.1:port, no trailing slash
	srv *http.Server
}

// Listen serves h on addr, a loopback address ("" picks a free port on
// 127.0.0.1).
func Listen(addr string, h http.Handler) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go s.srv.Serve(l)
	return s, nil
}

// Close stops the server at once.
func (s *Server) Close() error { return s.srv.Close() }

// Main is an application's command, for tests that run it as a process:
// it starts the server, prints one line, "<name> listening on <URL>", and
// serves until SIGINT or SIGTERM. A server that cannot start exits 1.
func Main(name string, start func() (*Server, error)) {
	s, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	fmt.Println(name + " listening on " + s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
}

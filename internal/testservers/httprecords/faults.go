package httprecords

import (
	"net/http"
	"sync"
	"time"
)

// Faults puts a server into the states an adapter must survive. The zero
// value is a healthy server.
type Faults struct {
	mu     sync.Mutex
	down   bool
	delay  time.Duration
	status int
	reqs   int
}

// SetDown makes the server answer 502 Bad Gateway, as a proxy in front of a
// stopped application does (true), or serve again (false).
func (f *Faults) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// SetDelay holds every answer for d (0: none), or until the client gives up.
func (f *Faults) SetDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// FailWith makes reads answer status with the server's own error body (0:
// answer normally).
func (f *Faults) FailWith(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

// Requests is how many requests the server has received.
func (f *Faults) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs
}

// apply runs the faults for one request and reports whether it was answered.
func (f *Faults) apply(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.reqs++
	down, delay := f.down, f.delay
	f.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return true
		}
	}
	if down {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))
		return true
	}
	return false
}

// failure is the status FailWith set, or 0.
func (f *Faults) failure() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

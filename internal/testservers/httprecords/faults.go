package httprecords

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
)

// Faults puts a server into the states an adapter must survive. The zero
// value is a healthy server.
type Faults struct {
	down   testservers.Setting[bool]
	delay  testservers.Setting[time.Duration]
	status testservers.Setting[int]
	reqs   atomic.Int64
}

// SetDown makes the server answer 502 Bad Gateway, as a proxy in front of a
// stopped application does (true), or serve again (false).
func (f *Faults) SetDown(down bool) { f.down.Set(down) }

// SetDelay holds every answer for d (0: none), or until the client gives up.
func (f *Faults) SetDelay(d time.Duration) { f.delay.Set(d) }

// FailWith makes reads answer status with the server's own error body (0:
// answer normally).
func (f *Faults) FailWith(status int) { f.status.Set(status) }

// Requests is how many requests the server has received.
func (f *Faults) Requests() int { return int(f.reqs.Load()) }

// apply runs the faults for one request and reports whether it was answered.
func (f *Faults) apply(w http.ResponseWriter, r *http.Request) bool {
	f.reqs.Add(1)
	if delay := f.delay.Get(); delay > 0 && !testservers.Hold(r.Context(), delay) {
		return true
	}
	if f.down.Get() {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))
		return true
	}
	return false
}

// failure is the status FailWith set, or 0.
func (f *Faults) failure() int { return f.status.Get() }

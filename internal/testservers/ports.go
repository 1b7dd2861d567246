package testservers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"sync"
)

// FreePort asks the kernel for a free TCP port on 127.0.0.1, for a server
// that must be told its port before it starts. The kernel may hand a
// just-released port out again, so a port this process was given before
// is never returned twice (two servers of one test would collide).
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no loopback port that was not handed out before")
}

// handedOut is every port FreePort gave out.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// RandomHex is n random bytes in hex: a password or token for one run.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

package testservers

import (
	"crypto/rand"
	"encoding/hex"
	"net"
)

// FreePort asks the kernel for a free TCP port on 127.0.0.1, for a server
// that must be told its port before it starts.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RandomHex is n random bytes in hex: a password or token for one run.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

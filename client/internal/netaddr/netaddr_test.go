package netaddr

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7443": true, "127.0.0.2": true, "[::1]:7443": true, "::1": true,
		"localhost:7443": true, "LOCALHOST": true,
		":7443": false, "0.0.0.0:7443": false, "[::]:7443": false, "192.0.2.1:7443": false,
		"verifierd.internal:7443": false, "localhost.example.com:7443": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package plugin

import (
	"os"
	"syscall"
)

// redirectStdout: see stdout_linux.go.
func redirectStdout() (orig *os.File, pipe *os.File, err error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fd)
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		syscall.Close(fd)
		return nil, nil, err
	}
	syscall.CloseOnExec(p[0])
	if err := syscall.Dup2(p[1], 1); err != nil {
		syscall.Close(fd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, err
	}
	syscall.Close(p[1])
	return os.NewFile(uintptr(fd), "handshake-stdout"), os.NewFile(uintptr(p[0]), "stdout-guard"), nil
}

package plugin

import (
	"os"
	"syscall"
)

// redirectStdout points fd 1 at a new pipe and returns a file for the
// original stdout and the pipe's read end. The pipe is made by hand, without
// O_NONBLOCK, because fd 1 is shared with os.Stdout, which writes blocking.
func redirectStdout() (orig *os.File, pipe *os.File, err error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fd)
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(fd)
		return nil, nil, err
	}
	// Dup3 without O_CLOEXEC: child processes inherit the guarded fd 1.
	if err := syscall.Dup3(p[1], 1, 0); err != nil {
		syscall.Close(fd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, err
	}
	syscall.Close(p[1])
	return os.NewFile(uintptr(fd), "handshake-stdout"), os.NewFile(uintptr(p[0]), "stdout-guard"), nil
}

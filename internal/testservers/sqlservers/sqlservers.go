// Package sqlservers starts real database servers for tests: PostgreSQL and
// MariaDB from the Debian packages (postgresql, mariadb-server), each in its
// own temporary folder, listening on 127.0.0.1 on a free port and on a unix
// socket inside that folder. A server runs as an unprivileged system user
// when the tests run as root (both servers refuse to run as root), and is
// stopped by its own PID.
//
// Each server is bootstrapped with two password-protected accounts and one
// database: an administrator that the tests write through, and a reader
// that may only SELECT, the role an operator should give the sql adapter.
// Passwords are random per server.
package sqlservers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled is wrapped by StartPostgres and StartMariaDB when the
// server's package is not installed; a test then calls testservers.Missing.
var ErrNotInstalled = errors.New("not installed")

// startTimeout bounds a server's start, bootstrap included.
const startTimeout = 60 * time.Second

// Account is a database login.
type Account struct {
	User     string
	Password string
}

// server is what both engines share: a process started from a fixed command
// line, its log, and the user it runs as.
type server struct {
	name    string
	dir     string // the server's temporary folder, removed by Close
	logPath string
	args    []string
	bin     string
	cred    *syscall.Credential

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd has been waited for.
	exited chan struct{}
}

// launch starts the server process.
func (s *server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("%s is already running (pid %d)", s.name, s.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "TZ=UTC"}
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	return nil
}

// halt sends sig to the server's own PID and waits for it to exit, killing
// it after a grace period.
func (s *server) halt(sig syscall.Signal) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s (pid %d) ignored %v for 30s and was killed", s.name, cmd.Process.Pid, sig)
	}
}

// running reports whether the process is up, and its PID.
func (s *server) running() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0, false
	}
	select {
	case <-s.exited:
		return s.cmd.Process.Pid, false
	default:
		return s.cmd.Process.Pid, true
	}
}

// Log returns the server's log so far.
func (s *server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const tail = 16 << 10
	if len(b) > tail {
		b = append([]byte("...\n"), b[len(b)-tail:]...)
	}
	return string(b)
}

// PID is the server process's id while it runs, or 0.
func (s *server) PID() int {
	pid, ok := s.running()
	if !ok {
		return 0
	}
	return pid
}

// waitReady polls ready until it succeeds, the process exits, or the start
// timeout passes.
func (s *server) waitReady(ready func(ctx context.Context) error) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		if _, ok := s.running(); !ok {
			return fmt.Errorf("%s exited while starting; its log:\n%s", s.name, s.Log())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not accept connections within %v (last error: %v); its log:\n%s", s.name, startTimeout, last, s.Log())
}

// runAs returns the credential to run a server as, and the uid/gid that
// must own its files: the named system user when the tests run as root,
// and the current user otherwise.
func runAs(names ...string) (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Geteuid(), os.Getegid(), nil
	}
	for _, name := range names {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, uid, gid, nil
	}
	return nil, 0, 0, fmt.Errorf("the tests run as root and the servers refuse root, but none of the users %v exists; install the Debian packages (scripts/deps.sh) or run the tests as another user", names)
}

// makeDir creates a folder for the server, owned by the user it runs as.
func makeDir(parent, prefix string, uid, gid int) (string, error) {
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	// Others (the tests' own user, root or not) reach the socket inside.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// writeOwned writes a file the server's user can read and nobody else.
func writeOwned(path string, data []byte, uid, gid int) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chown(path, uid, gid)
}

// runTool runs a bootstrap program as the server's user and returns its
// output on failure.
func runTool(cred *syscall.Credential, dir, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "TZ=UTC"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", filepath.Base(bin), args, err, out.String())
	}
	return nil
}

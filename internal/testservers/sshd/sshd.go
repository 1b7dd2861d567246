// Package sshd runs a real, throwaway OpenSSH sshd on 127.0.0.1 for
// tests that need an SFTP server: host and client keys generated for the
// test, a generated sshd_config in the test's temporary folder, the
// server's own log, and stop, freeze and restart by the server's PID (and
// the session processes it forked). Nothing outside the temporary folder is
// touched except /run/sshd, the privilege-separation folder a root sshd
// requires, created when missing.
//
// It needs /usr/sbin/sshd (Debian: openssh-server); a test without it is
// skipped with a message saying what to install, or fails when CI is set
// (testservers.Missing).
package sshd

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/verifierd/verifierd/internal/testservers"
)

// SSHD is the server binary.
const SSHD = "/usr/sbin/sshd"

// Server is one running sshd.
type Server struct {
	Host string // always 127.0.0.1
	Port int
	// User is the account a test logs in as: the user running the test.
	User string
	// ClientKey is the authorised client's private key (OpenSSH PEM).
	ClientKey []byte
	// HostKey is the server's Ed25519 host key, the one a client
	// preferring Ed25519 is shown; HostKeyFingerprint its SHA-256
	// fingerprint as ssh-keygen prints it.
	HostKey            ssh.PublicKey
	HostKeyFingerprint string
	// ECDSAHostKey is the server's second host key (ECDSA P-256), shown
	// only to a client that asks for that type.
	ECDSAHostKey ssh.PublicKey
	// KnownHosts is a known_hosts file that lists the server.
	KnownHosts string
	// Dir holds the keys, the config, the log and the pid file.
	Dir string

	config string
	// logPath is sshd's stdout and stderr, kept across restarts.
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a new sshd and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		testservers.Missing(t, "OpenSSH's sshd ("+SSHD+")", "apt-get install openssh-server")
	}
	if os.Geteuid() == 0 {
		// A root sshd chroots its unprivileged child here.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("creating /run/sshd for sshd's privilege separation: %v", err)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Host: "127.0.0.1", User: u.Username, Dir: t.TempDir()}

	hostPEM, hostPub := NewKey(t)
	s.HostKey = hostPub
	s.HostKeyFingerprint = ssh.FingerprintSHA256(hostPub)
	ecdsaPEM, ecdsaPub := newECDSAKey(t)
	s.ECDSAHostKey = ecdsaPub
	clientPEM, clientPub := NewKey(t)
	s.ClientKey = clientPEM
	write(t, filepath.Join(s.Dir, "host_ed25519"), hostPEM)
	write(t, filepath.Join(s.Dir, "host_ecdsa"), ecdsaPEM)
	write(t, filepath.Join(s.Dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub))

	if s.Port, err = testservers.FreePort(); err != nil {
		t.Fatal(err)
	}
	s.KnownHosts = s.KnownHostsWith(t, hostPub)
	s.config = filepath.Join(s.Dir, "sshd_config")
	s.logPath = filepath.Join(s.Dir, "sshd.log")
	write(t, s.config, []byte(strings.Join([]string{
		"ListenAddress 127.0.0.1",
		"Port " + strconv.Itoa(s.Port),
		"HostKey " + filepath.Join(s.Dir, "host_ed25519"),
		"HostKey " + filepath.Join(s.Dir, "host_ecdsa"),
		"PidFile " + filepath.Join(s.Dir, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(s.Dir, "authorized_keys"),
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication yes",
		"KbdInteractiveAuthentication no",
		"UseDNS no",
		"MaxStartups 100",
		"MaxSessions 100",
		"LogLevel VERBOSE",
		"Subsystem sftp internal-sftp",
		"",
	}, "\n")))
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// KnownHostsWith writes a known_hosts file that lists this server's address
// with key (the right key, or another one for a refusal test) and returns
// its path.
func (s *Server) KnownHostsWith(t testing.TB, key ssh.PublicKey) string {
	t.Helper()
	f, err := os.CreateTemp(s.Dir, "known_hosts-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(s.Addr())}, key)); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// NewKey generates an Ed25519 key pair: the private key as OpenSSH PEM and
// the public key.
func NewKey(t testing.TB) ([]byte, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), sshPub
}

func newECDSAKey(t testing.TB) ([]byte, ssh.PublicKey) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), pub
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// start launches sshd in the foreground (-D) logging to its stderr (-e),
// which it appends to the log file, and waits until it greets a
// connection.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // sshd holds its own descriptor
	cmd := exec.Command(SSHD, "-D", "-e", "-f", s.config)
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", SSHD, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited at start:\n%s", s.Log())
		default:
		}
		if greets(s.Addr()) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("sshd did not greet on %s:\n%s", s.Addr(), s.Log())
}

func greets(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// Pid is the listening sshd's PID, 0 when stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop kills the listening sshd and every session process it forked, and
// waits for the listener to be gone: the server vanishes as in a crash.
// The deepest processes die first, each reaped by its own parent, so none is
// left to an init that may not reap.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	tree := descendants(pid)
	for _, p := range append(tree, pid) {
		syscall.Kill(p, syscall.SIGCONT) // a frozen parent cannot reap
	}
	for _, t := range slices.Backward(tree) {
		syscall.Kill(t, syscall.SIGKILL)
		waitReaped(t, time.Second)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// waitReaped waits until pid is gone from /proc (a zombie stays there until
// its parent reaps it), at most for d.
func waitReaped(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Freeze stops (SIGSTOP) the sshd and its session processes: the port stays
// open and connections are accepted by the kernel, but nothing answers, as
// with a hung server. Thaw resumes them.
func (s *Server) Freeze() { s.signalTree(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signalTree(syscall.SIGCONT) }

func (s *Server) signalTree(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(pid, sig)
	for _, c := range descendants(pid) {
		syscall.Kill(c, sig)
	}
}

// Restart starts a stopped server again on the same port with the same
// keys.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// OpenFiles lists the files the server's processes hold open now, read
// from /proc: a test sees from it that a client's read is under way.
func (s *Server) OpenFiles() []string {
	pid := s.Pid()
	if pid == 0 {
		return nil
	}
	var out []string
	for _, p := range append(descendants(pid), pid) {
		dir := "/proc/" + strconv.Itoa(p) + "/fd"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "/") {
				out = append(out, target)
			}
		}
	}
	return out
}

// Log is everything sshd logged so far.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(sshd's log %s cannot be read: %v)", s.logPath, err)
	}
	return string(b)
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		var next []int
		for p, pp := range parent {
			for _, f := range frontier {
				if pp == f {
					out = append(out, p)
					next = append(next, p)
				}
			}
		}
		frontier = next
	}
	return out
}

package file

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/verifierd/verifierd/adapters/internal/filewalk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// sftpSection is the section's sftp: map. The *_env keys hold environment
// variable names; the daemon resolves them and delivers the values in
// ConfigureRequest.Secrets under "sftp.<key>".
type sftpSection struct {
	Host                    string      `json:"host"`
	Port                    json.Number `json:"port"`
	User                    string      `json:"user"`
	KnownHosts              string      `json:"known_hosts"`
	HostKeyFingerprint      string      `json:"host_key_fingerprint"`
	PrivateKeyEnv           string      `json:"private_key_env"`
	PrivateKeyPassphraseEnv string      `json:"private_key_passphrase_env"`
	PasswordEnv             string      `json:"password_env"`
}

// sftpSettings is how to reach and trust the server. It holds the parsed
// credentials; nothing here is ever logged or put in a reason.
type sftpSettings struct {
	mu     sync.Mutex
	idle   *sftpConn // the connection the last read left (take, keep)
	closed bool

	addr        string // host:port
	user        string
	knownHosts  string // absolute path; "" when not used
	fingerprint string // "SHA256:<base64>"; "" when not used
	auth        []ssh.AuthMethod
}

func configureSFTP(c *sftpSection, secrets map[string]string) (*sftpSettings, error) {
	s := &sftpSettings{user: c.User}
	host := strings.TrimSpace(c.Host)
	if host == "" || strings.ContainsAny(host, " /") {
		return nil, &refusal.Error{Path: "sftp.host", Message: "missing or malformed: name the SFTP server's host name or IP address"}
	}
	port := 22
	if c.Port != "" {
		p, err := strconv.Atoi(string(c.Port))
		if err != nil || p < 1 || p > 65535 {
			return nil, &refusal.Error{Path: "sftp.port", Message: "must be a TCP port number from 1 to 65535 (default 22)"}
		}
		port = p
	}
	s.addr = net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
	if c.User == "" {
		return nil, &refusal.Error{Path: "sftp.user", Message: "missing: name the account the adapter logs in as (a read-only account)"}
	}

	if c.KnownHosts == "" && c.HostKeyFingerprint == "" {
		return nil, &refusal.Error{Path: "sftp.known_hosts", Message: "missing: name a known_hosts file that lists the server, or pin its key with host_key_fingerprint (SHA256:... as ssh-keygen -lf prints it); an unknown host key is never accepted"}
	}
	if c.KnownHosts != "" {
		p, err := filepath.Abs(c.KnownHosts)
		if err != nil {
			return nil, &refusal.Error{Path: "sftp.known_hosts", Message: err.Error()}
		}
		if _, err := knownhosts.New(p); err != nil {
			return nil, &refusal.Error{Path: "sftp.known_hosts", Message: fmt.Sprintf("cannot be used: %v", filewalk.Unwrap(err))}
		}
		s.knownHosts = p
	}
	if c.HostKeyFingerprint != "" {
		fp, err := parseFingerprint(c.HostKeyFingerprint)
		if err != nil {
			return nil, &refusal.Error{Path: "sftp.host_key_fingerprint", Message: err.Error()}
		}
		s.fingerprint = fp
	}

	if c.PrivateKeyEnv == "" && c.PasswordEnv == "" {
		return nil, &refusal.Error{Path: "sftp.private_key_env", Message: "missing: name the environment variable that holds the SSH private key (or, for a password, password_env)"}
	}
	if c.PrivateKeyEnv != "" {
		signer, err := parseKey(c, secrets)
		if err != nil {
			return nil, err
		}
		s.auth = append(s.auth, ssh.PublicKeys(signer))
	} else if c.PrivateKeyPassphraseEnv != "" {
		return nil, &refusal.Error{Path: "sftp.private_key_passphrase_env", Message: "is only read with private_key_env"}
	}
	if c.PasswordEnv != "" {
		pw, err := secret(secrets, slotPassword, c.PasswordEnv)
		if err != nil {
			return nil, err
		}
		s.auth = append(s.auth, ssh.Password(pw), ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i := range answers {
				answers[i] = pw
			}
			return answers, nil
		}))
	}
	return s, nil
}

// The secret slots, as the daemon names them.
const (
	slotPrivateKey = "sftp.private_key_env"
	slotPassphrase = "sftp.private_key_passphrase_env"
	slotPassword   = "sftp.password_env"
)

// secret is the value the daemon resolved for slot; the error names the
// variable, never a value.
func secret(secrets map[string]string, slot, name string) (string, error) {
	v, ok := secrets[slot]
	if !ok || v == "" {
		return "", &refusal.Error{Path: slot, Message: fmt.Sprintf("no value was delivered for the environment variable %s; set it in the daemon's environment", name)}
	}
	return v, nil
}

func parseKey(c *sftpSection, secrets map[string]string) (ssh.Signer, error) {
	pem, err := secret(secrets, slotPrivateKey, c.PrivateKeyEnv)
	if err != nil {
		return nil, err
	}
	var signer ssh.Signer
	if c.PrivateKeyPassphraseEnv != "" {
		pass, err := secret(secrets, slotPassphrase, c.PrivateKeyPassphraseEnv)
		if err != nil {
			return nil, err
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase([]byte(pem), []byte(pass))
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, &refusal.Error{Path: slotPassphrase, Message: fmt.Sprintf("the passphrase in %s does not decrypt the key in %s", c.PrivateKeyPassphraseEnv, c.PrivateKeyEnv)}
		}
		if err != nil {
			return nil, &refusal.Error{Path: slotPrivateKey, Message: fmt.Sprintf("the variable %s does not hold a private key ssh can read (OpenSSH or PEM format)", c.PrivateKeyEnv)}
		}
		return signer, nil
	}
	signer, err = ssh.ParsePrivateKey([]byte(pem))
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, &refusal.Error{Path: slotPrivateKey, Message: fmt.Sprintf("the key in %s is encrypted; name the variable holding its passphrase under sftp.private_key_passphrase_env", c.PrivateKeyEnv)}
	case err != nil:
		return nil, &refusal.Error{Path: slotPrivateKey, Message: fmt.Sprintf("the variable %s does not hold a private key ssh can read (OpenSSH or PEM format)", c.PrivateKeyEnv)}
	}
	return signer, nil
}

// parseFingerprint accepts a SHA-256 host-key fingerprint as ssh-keygen -l
// prints it: "SHA256:" and unpadded base64 of 32 bytes.
func parseFingerprint(fp string) (string, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(fp), "SHA256:")
	if !ok {
		return "", errors.New(`must be a SHA-256 fingerprint as ssh-keygen -lf prints it, e.g. "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s" (MD5 fingerprints are not accepted)`)
	}
	b64 = strings.TrimRight(b64, "=")
	raw, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return "", errors.New("the part after SHA256: must be the 43-character base64 digest ssh-keygen prints")
	}
	return "SHA256:" + b64, nil
}

// Host-key algorithm families, in the order OpenSSH prefers them. A server
// with several host keys presents the one the negotiation picks, so a
// rejection is retried once per other family the trust allows.
var keyFamilies = [][]string{
	{ssh.KeyAlgoED25519},
	{ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521},
	{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256},
}

func familyOf(keyType string) int {
	switch {
	case keyType == ssh.KeyAlgoED25519:
		return 0
	case strings.HasPrefix(keyType, "ecdsa-sha2-"):
		return 1
	case keyType == ssh.KeyAlgoRSA:
		return 2
	}
	return -1
}

// hostKeyRefusal is a host key the trust does not accept.
type hostKeyRefusal struct {
	keyType, fingerprint string
	why                  string
	want                 []int // families the trust accepts for this host
}

func (r *hostKeyRefusal) Error() string {
	return fmt.Sprintf("host key refused: the server presented %s %s; %s (an unknown or changed host key is never accepted)", r.keyType, r.fingerprint, r.why)
}

// checkHostKey applies the configured trust to one presented key.
func (c *sftpSettings) checkHostKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	fp := ssh.FingerprintSHA256(key)
	refuse := &hostKeyRefusal{keyType: key.Type(), fingerprint: fp}
	if c.knownHosts != "" {
		cb, err := knownhosts.New(c.knownHosts)
		if err != nil {
			refuse.why = fmt.Sprintf("known_hosts %s cannot be read: %v", c.knownHosts, filewalk.Unwrap(err))
			return refuse
		}
		var ke *knownhosts.KeyError
		switch err := cb(hostname, remote, key); {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			refuse.why = fmt.Sprintf("known_hosts %s does not list %s", c.knownHosts, hostname)
			return refuse
		case errors.As(err, &ke):
			for _, k := range ke.Want {
				if f := familyOf(k.Key.Type()); f >= 0 && !slices.Contains(refuse.want, f) {
					refuse.want = append(refuse.want, f)
				}
			}
			refuse.why = fmt.Sprintf("known_hosts %s lists another key for %s", c.knownHosts, hostname)
			return refuse
		case err != nil:
			refuse.why = err.Error()
			return refuse
		}
	}
	if c.fingerprint != "" && fp != c.fingerprint {
		refuse.why = "it is not the pinned host_key_fingerprint " + c.fingerprint
		refuse.want = []int{0, 1, 2}
		return refuse
	}
	return nil
}

// errNoCommonHostKey is a server without a host key of an offered type.
var errNoCommonHostKey = errors.New("the server has no host key of a type this adapter accepts (ssh-ed25519, ecdsa-sha2-*, rsa-sha2-256/512)")

// dial connects, checks the host key and logs in, all bounded by ctx: the
// connection's deadline is ctx's, and it is closed when ctx ends, because
// neither ssh nor sftp calls take a context. The returned stop undoes the
// close-on-ctx registration; closing the client closes the connection.
//
// A refused host key is retried with each other key type the trust allows
// (a server with several host keys presents the one negotiation picks);
// the first refusal is the one reported.
func (c *sftpSettings) dial(ctx context.Context) (*ssh.Client, net.Conn, func() bool, error) {
	offer := []int{0, 1, 2}
	tried := map[int]bool{}
	var refused *hostKeyRefusal
	for range len(keyFamilies) + 1 {
		client, conn, stop, err := c.dialOnce(ctx, offer)
		if err == nil {
			return client, conn, stop, nil
		}
		var r *hostKeyRefusal
		switch {
		case ctx.Err() != nil:
			return nil, nil, nil, err
		case errors.As(err, &r):
			if refused == nil {
				refused = r
			}
			tried[familyOf(r.keyType)] = true
		case errors.Is(err, errNoCommonHostKey) && refused != nil:
		default:
			return nil, nil, nil, err
		}
		if len(offer) == 1 {
			tried[offer[0]] = true
		}
		offer = nil
		for _, f := range refused.want {
			if !tried[f] {
				offer = []int{f}
				break
			}
		}
		if offer == nil {
			break
		}
	}
	return nil, nil, nil, refused
}

func (c *sftpSettings) dialOnce(ctx context.Context, families []int) (*ssh.Client, net.Conn, func() bool, error) {
	var algos []string
	for _, f := range families {
		algos = append(algos, keyFamilies[f]...)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot connect: %v", unwrapNet(err))
	}
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	var refusal *hostKeyRefusal
	cfg := &ssh.ClientConfig{
		User: c.user,
		Auth: c.auth,
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := c.checkHostKey(hostname, remote, key)
			errors.As(err, &refusal)
			return err
		},
		HostKeyAlgorithms: algos,
	}
	sconn, chans, reqs, err := ssh.NewClientConn(conn, c.addr, cfg)
	if err != nil {
		stop()
		conn.Close()
		msg := strings.TrimPrefix(err.Error(), "ssh: handshake failed: ")
		switch {
		case refusal != nil:
			return nil, nil, nil, refusal
		case pastDeadline(ctx):
			return nil, nil, nil, errors.New("the server did not complete the SSH handshake before the deadline")
		case strings.Contains(msg, "unable to authenticate"):
			return nil, nil, nil, fmt.Errorf("the server refused the credentials of user %s (%s)", c.user, msg)
		case strings.Contains(msg, "no common algorithm for host key"):
			return nil, nil, nil, errNoCommonHostKey
		}
		return nil, nil, nil, fmt.Errorf("SSH handshake failed: %s", msg)
	}
	return ssh.NewClient(sconn, chans, reqs), conn, stop, nil
}

// connectionLost reports whether err is the server going away: closed,
// reset or cut off mid-stream.
func connectionLost(err error) bool {
	for _, target := range []error{sftp.ErrSSHFxConnectionLost, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// unwrapNet drops the *net.OpError layers that repeat the address.
func unwrapNet(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// sftpConn is one logged-in connection and its sftp session. A read that
// ends well leaves it to the next read (sftpSettings.keep), so that the
// reads of one settlement, a few milliseconds apart, do not each pay for
// a TCP connection, an SSH key exchange and a login: on a loaded machine
// that costs more than the whole deadline of a read, and a read that
// cannot connect in time is unreachable.
type sftpConn struct {
	net    net.Conn
	client *ssh.Client
	sc     *sftp.Client
}

func (k *sftpConn) close() {
	k.sc.Close()
	k.client.Close()
}

// arm bounds the use of k by ctx: the connection's deadline is ctx's, and
// it is closed when ctx ends, because neither ssh nor sftp calls take a
// context. disarm undoes both and reports whether the connection is still
// sound (ctx did not end on it).
func (k *sftpConn) arm(ctx context.Context) (disarm func() bool) {
	if d, ok := ctx.Deadline(); ok {
		k.net.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, k.close)
	return func() bool {
		if !stop() {
			return false
		}
		k.net.SetDeadline(time.Time{})
		return true
	}
}

// take returns the connection the last read left, or nil.
func (c *sftpSettings) take() *sftpConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.idle
	c.idle = nil
	return k
}

// keep leaves k to the next read; one is kept, and none after Close.
func (c *sftpSettings) keep(k *sftpConn) {
	c.mu.Lock()
	if c.idle == nil && !c.closed {
		c.idle, k = k, nil
	}
	c.mu.Unlock()
	if k != nil {
		k.close()
	}
}

// Close closes the connection kept for the next read.
func (s *settings) Close() error {
	if s.sftp == nil {
		return nil
	}
	c := s.sftp
	c.mu.Lock()
	k := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	if k != nil {
		k.close()
	}
	return nil
}

// openSFTP opens root on the server: over the connection the last read
// left when the server still answers on it, else over a new one
// (connecting, checking the host key and logging in).
func (s *settings) openSFTP(ctx context.Context) (*tree, error) {
	c := s.sftp
	where := fmt.Sprintf("sftp %s@%s", c.user, c.addr)
	if k := c.take(); k != nil {
		if t, err := s.openRoot(ctx, k, where); err == nil {
			return t, nil
		}
		// The server dropped the kept connection (an idle timeout, a
		// restart): a new one decides.
		if pastDeadline(ctx) {
			return nil, fmt.Errorf("%s: the server did not answer before the deadline", where)
		}
	}
	client, conn, stop, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	stop()
	k := &sftpConn{net: conn, client: client}
	disarm := k.arm(ctx)
	k.sc, err = sftp.NewClient(client)
	if err != nil {
		disarm()
		client.Close()
		return nil, fmt.Errorf("%s: the server did not start its sftp subsystem: %v", where, sftpCause(ctx, err))
	}
	if !disarm() {
		return nil, fmt.Errorf("%s: the server did not answer before the deadline", where)
	}
	return s.openRoot(ctx, k, where)
}

// sftpCause explains an error seen while reading over SFTP: a deadline or
// a dropped connection says more than the error of the call it broke.
func sftpCause(ctx context.Context, err error) error {
	if pastDeadline(ctx) {
		return errors.New("the server did not answer before the deadline")
	}
	if connectionLost(err) {
		return fmt.Errorf("the connection to the server was lost mid-read (%v)", err)
	}
	return err
}

// openRoot checks over k, for the read of ctx, that root is a folder on
// the server. The tree's close keeps k for the next read when the read
// marked itself sound (tree.sound) and ctx did not end on it; otherwise it
// closes k. On an error k is closed.
func (s *settings) openRoot(ctx context.Context, k *sftpConn, where string) (*tree, error) {
	c := s.sftp
	disarm := k.arm(ctx)
	cause := func(err error) error { return sftpCause(ctx, err) }
	fsys := &sftpFS{ctx: ctx, c: k.sc, root: s.root}
	fi, err := fsys.Stat(".")
	if err == nil && !fi.IsDir() {
		err = errors.New("not a folder")
	}
	if err != nil {
		disarm()
		k.close()
		return nil, fmt.Errorf("%s: root %s cannot be opened: %v", where, s.root, cause(filewalk.Unwrap(err)))
	}
	note := "credentials accepted"
	if c.fingerprint != "" {
		note = "host key matches the pinned fingerprint; " + note
	}
	if c.knownHosts != "" {
		note = "host key listed in " + c.knownHosts + "; " + note
	}
	t := &tree{
		fsys:  fsys,
		where: fmt.Sprintf("%s root %s", where, s.root),
		note:  note,
		cause: cause,
	}
	t.close = func() {
		if disarm() && t.sound {
			c.keep(k)
			return
		}
		k.close()
	}
	return t, nil
}

// sftpFS is an SFTP server's folder as an fs.FS. Paths are resolved below
// root by the server; what the account can read is what is listed.
type sftpFS struct {
	ctx  context.Context
	c    *sftp.Client
	root string
}

func (f *sftpFS) full(name string) string {
	if name == "." {
		return f.root
	}
	return path.Join(f.root, name)
}

func (f *sftpFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := f.c.OpenFile(f.full(name), os.O_RDONLY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return file, nil
}

func (f *sftpFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	fi, err := f.c.Stat(f.full(name))
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fi, nil
}

func (f *sftpFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	infos, err := f.c.ReadDirContext(f.ctx, f.full(name))
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	entries := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		entries[i] = fs.FileInfoToDirEntry(fi)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

package client

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/verifierd/verifierd/client/internal/netaddr"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// maxMessage bounds a request or answer (a result quotes matched records).
const maxMessage = 64 << 20

// verifyAfterCancel bounds the verification Step still makes when the
// caller's context ended during the action: the action may have partly
// happened, and the daemon should record what it finds.
const verifyAfterCancel = 2 * time.Minute

// Client is a connection to one daemon. It is safe for concurrent use;
// Close releases it.
type Client struct {
	conn *grpc.ClientConn
	api  verifierv1.VerifierServiceClient
	key  ed25519.PublicKey
}

type config struct {
	tls       *tls.Config
	caFile    string
	tokenEnv  string
	insecure  bool
	key       ed25519.PublicKey
	dialOpts  []grpc.DialOption
	lookupEnv func(string) (string, bool)
}

// Option configures Dial.
type Option func(*config)

// WithTLS makes the connection TLS with cfg (nil: the system roots).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg
	}
}

// WithTLSCA makes the connection TLS, trusting the CA certificates (PEM)
// in the file at path: the daemon's --tls-cert is signed by one of them.
func WithTLSCA(path string) Option { return func(c *config) { c.caFile = path } }

// WithTokenEnv sends the API bearer token held in the environment variable
// name (the daemon's --token-env) on every call. The variable is read once,
// by Dial; the token is never logged or kept anywhere else.
func WithTokenEnv(name string) Option { return func(c *config) { c.tokenEnv = name } }

// WithInsecure allows sending the bearer token in plaintext to an address
// that is not loopback. Without it, Dial refuses a token with no TLS to
// anything but 127.0.0.1, ::1 or localhost.
func WithInsecure() Option { return func(c *config) { c.insecure = true } }

// WithReceiptKey checks every result's receipt against pub, the daemon's
// receipt signing key (verifyctl info, or the key file the operator
// publishes), and against the session, deployment and step asked for.
func WithReceiptKey(pub ed25519.PublicKey) Option { return func(c *config) { c.key = pub } }

// WithDialOptions adds gRPC dial options (interceptors, a custom dialer,
// keepalive), applied after the client's own.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// Dial connects to the daemon's gRPC API at addr (HOST:PORT, the daemon's
// --listen). It does not wait for the daemon: the first call does.
func Dial(addr string, opts ...Option) (*Client, error) {
	c := config{lookupEnv: os.LookupEnv}
	for _, o := range opts {
		o(&c)
	}
	if addr == "" {
		return nil, errors.New("client.Dial: no address; give the daemon's --listen address, e.g. 127.0.0.1:7443")
	}
	if c.key != nil && len(c.key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("client.WithReceiptKey: an Ed25519 public key is %d bytes, not %d", ed25519.PublicKeySize, len(c.key))
	}
	creds, err := c.transport()
	if err != nil {
		return nil, err
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))}
	if c.tokenEnv != "" {
		tok, ok := c.lookupEnv(c.tokenEnv)
		if !ok || tok == "" {
			return nil, fmt.Errorf("client.WithTokenEnv: the environment variable %s is not set; export the daemon's API token in it", c.tokenEnv)
		}
		secure := c.tls != nil || c.caFile != ""
		if !secure && !c.insecure && !netaddr.IsLoopback(addr) {
			return nil, fmt.Errorf("client.Dial: refusing to send the token from %s in plaintext to %s; use WithTLSCA or WithTLS, or WithInsecure to send it anyway", c.tokenEnv, addr)
		}
		dial = append(dial, grpc.WithPerRPCCredentials(bearer{token: tok, secure: secure}))
	}
	dial = append(dial, c.dialOpts...)
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("client.Dial %s: %w", addr, err)
	}
	return &Client{conn: conn, api: verifierv1.NewVerifierServiceClient(conn), key: c.key}, nil
}

func (c *config) transport() (credentials.TransportCredentials, error) {
	if c.caFile == "" {
		if c.tls != nil {
			return credentials.NewTLS(c.tls), nil
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("client.WithTLSCA: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tls != nil {
		cfg = c.tls.Clone()
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client.WithTLSCA: %s holds no PEM certificate; give the CA that signed the daemon's --tls-cert", c.caFile)
	}
	return credentials.NewTLS(cfg), nil
}

// bearer sends the API token on every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false: Dial has already refused a plaintext
// token to anything but loopback unless the caller allowed it.
func (b bearer) RequireTransportSecurity() bool { return false }

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// API is the generated gRPC client on the same connection, for the calls
// this package does not wrap (TestConnection, Judge, GetSession,
// ExportLedger, Reverify, VerifyArtifact).
func (c *Client) API() verifierv1.VerifierServiceClient { return c.api }

// SigningKey asks the daemon for its receipt signing key. A key learnt
// from the daemon it is meant to check proves nothing about that daemon:
// pin the key (WithReceiptKey) from a source you trust, and use this only
// to compare with it.
func (c *Client) SigningKey(ctx context.Context) (ed25519.PublicKey, error) {
	info, err := c.api.GetInfo(ctx, &verifierv1.GetInfoRequest{})
	if err != nil {
		return nil, err
	}
	return receipt.ParsePublicKey(info.GetPublicKey())
}

// Begin opens a session for req: the daemon binds the parameters, pins a
// candidate per effect and reads the baseline. A refusal by policy or by
// the daemon's state (PermissionDenied, FailedPrecondition) is a *Refused:
// no session exists and the action must not run. Any other failure is the
// gRPC status error.
func (c *Client) Begin(ctx context.Context, req Request) (*Session, error) {
	pb, err := req.proto()
	if err != nil {
		return nil, err
	}
	res, err := c.api.Begin(ctx, pb)
	if err != nil {
		return nil, refusal(err)
	}
	return sessionOf(res, req), nil
}

// Verify judges the session s after its action and returns the result:
// any outcome is a result, not an error (Step is what turns an outcome
// other than VERIFIED into an error). Verifying a finished session again
// returns the recorded result. With WithReceiptKey the receipt is checked
// first (*ReceiptError).
func (c *Client) Verify(ctx context.Context, s *Session) (*Result, error) {
	if s == nil || s.ID == "" {
		return nil, errors.New("client.Verify: no session; give the *Session Begin returned (or one with the ID of a begun session)")
	}
	res, err := c.api.Verify(ctx, &verifierv1.VerifyRequest{SessionId: s.ID})
	if err != nil {
		return nil, err
	}
	r := resultOf(res)
	if c.key != nil {
		if _, err := r.CheckReceipt(c.key, s.Expect()); err != nil {
			return nil, &ReceiptError{Result: r, Err: err}
		}
	}
	return r, nil
}

// Step begins a session for req, runs action, verifies the session and
// returns nil only when the outcome is VERIFIED. The action's context
// carries the session (SessionFrom). Errors:
//
//   - *Refused: Begin was refused; the action did not run.
//   - *ActionError: the action failed; the session was verified anyway
//     (the result, or the verification's own error, is on the
//     ActionError), and errors.Is and errors.As reach the action's error.
//   - *NotConfirmed: the outcome is RECONCILIATION_REQUIRED or
//     HALTED_BEFORE_EFFECT.
//   - *ReceiptError, or a gRPC status error from Begin or Verify.
//
// An action that panics is verified the same way before the panic goes on.
func (c *Client) Step(ctx context.Context, req Request, action func(ctx context.Context) error) error {
	return c.step(ctx, func(ctx context.Context) (*Session, error) { return c.Begin(ctx, req) }, action)
}

// step is Step over any way of beginning a session: a step of its own, or
// a step inside a larger unit of work whose Begin names more than req
// does. The semantics after Begin do not depend on how it began.
func (c *Client) step(ctx context.Context, begin func(context.Context) (*Session, error), action func(context.Context) error) error {
	s, err := begin(ctx)
	if err != nil {
		return err
	}
	finished := false
	defer func() {
		if !finished {
			// The action panicked: record what landed, then let it go on.
			p := recover()
			_, _ = c.verifyAfter(ctx, s)
			panic(p)
		}
	}()
	actErr := action(withSession(ctx, s))
	finished = true
	res, verr := c.verifyAfter(ctx, s)
	if actErr != nil {
		return &ActionError{Err: actErr, Session: s, Result: res, VerifyErr: verr}
	}
	if verr != nil {
		return verr
	}
	if res.Outcome != Verified {
		return &NotConfirmed{Result: res}
	}
	return nil
}

// verifyAfter verifies s after its action. When the action ended the
// caller's context, the verification still runs, bounded by
// verifyAfterCancel.
func (c *Client) verifyAfter(ctx context.Context, s *Session) (*Result, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), verifyAfterCancel)
		defer cancel()
	}
	return c.Verify(ctx, s)
}

type sessionKey struct{}

func withSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFrom returns the session of the Step whose action ctx was given
// to, and false outside an action.
func SessionFrom(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok
}

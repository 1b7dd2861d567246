package sqlservers

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/testservers"
)

// Postgres is a PostgreSQL server started for tests.
type Postgres struct {
	server
	// Port is the TCP port on 127.0.0.1; SocketDir holds the unix socket.
	Port      int
	SocketDir string
	// Database is created at bootstrap and owned by Admin.
	Database string
	// Admin is a superuser; Reader may only connect and SELECT from the
	// tables Admin creates in the public schema.
	Admin, Reader Account
}

// postgresBin finds the server binaries of the newest installed major
// version (Debian keeps them in /usr/lib/postgresql/<major>/bin).
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(major(b), major(a)) }) // newest first
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server under /usr/lib/postgresql/*/bin: %w; install the Debian package postgresql (scripts/deps.sh)", ErrNotInstalled)
}

// StartPostgres initialises a cluster in a new folder under parent, starts
// it and creates the accounts and the database. On error the returned
// server (when not nil) still has the log; Close removes everything.
func StartPostgres(parent string) (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := runAs("postgres", "nobody")
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(parent, "postgres-", uid, gid)
	if err != nil {
		return nil, err
	}
	port, err := testservers.FreePort()
	if err != nil {
		return nil, err
	}
	p := &Postgres{
		Port:      port,
		SocketDir: dir,
		Database:  "records",
		Admin:     Account{User: "verifier_admin", Password: testservers.RandomHex(12)},
		Reader:    Account{User: "verifier_reader", Password: testservers.RandomHex(12)},
	}
	data := filepath.Join(dir, "data")
	p.server = server{
		name:    "postgres",
		dir:     dir,
		logPath: filepath.Join(dir, "postgres.log"),
		bin:     filepath.Join(bin, "postgres"),
		cred:    cred,
		args: []string{
			"-D", data,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "port=" + strconv.Itoa(port),
			"-c", "unix_socket_directories=" + dir,
			// A test cluster: durability is not under test.
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "shared_buffers=256MB",
			"-c", "max_connections=200",
			"-c", "log_min_messages=warning",
			"-c", "log_timezone=UTC",
			// Logical decoding, for the write set (internal/changes).
			"-c", "wal_level=logical",
			"-c", "max_replication_slots=20",
			"-c", "max_wal_senders=20",
		},
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := writeOwned(pwfile, []byte(p.Admin.Password+"\n"), uid, gid); err != nil {
		return p, err
	}
	// Password authentication on TCP (so a wrong password is refused),
	// trust on the socket in the test's own folder.
	if err := runTool(cred, dir, filepath.Join(bin, "initdb"),
		"-D", data, "-U", p.Admin.User, "--pwfile", pwfile, "-E", "UTF8", "--locale", "C.UTF-8",
		"--auth-host", "scram-sha-256", "--auth-local", "trust", "--no-sync"); err != nil {
		return p, err
	}
	os.Remove(pwfile)
	if err := p.Start(); err != nil {
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.Exec(ctx, "postgres",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", p.Reader.User, p.Reader.Password),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", p.Database, p.Admin.User),
	); err != nil {
		return p, err
	}
	if err := p.Exec(ctx, p.Database,
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", p.Database, p.Reader.User),
		fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", p.Reader.User),
		fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT SELECT ON TABLES TO %s", p.Admin.User, p.Reader.User),
	); err != nil {
		return p, err
	}
	return p, nil
}

// Start starts the server (again, after Stop) on the same folder and port
// and waits until it accepts connections.
func (p *Postgres) Start() error {
	if err := p.launch(); err != nil {
		return err
	}
	return p.waitReady(func(ctx context.Context) error {
		c, err := p.Connect(ctx, "postgres", p.Admin)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
}

// Stop shuts the server down (fast shutdown: clients are disconnected) and
// waits for it to exit.
func (p *Postgres) Stop() error { return p.halt(syscall.SIGINT) }

// Close stops the server and removes its folder.
func (p *Postgres) Close() error {
	err := p.Stop()
	os.RemoveAll(p.dir)
	return err
}

// Connect opens a connection over TCP to database as account.
func (p *Postgres) Connect(ctx context.Context, database string, a Account) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable", p.Port, database, a.User))
	if err != nil {
		return nil, err
	}
	cfg.Password = a.Password
	return pgx.ConnectConfig(ctx, cfg)
}

// Exec runs each statement as the administrator on database.
func (p *Postgres) Exec(ctx context.Context, database string, stmts ...string) error {
	c, err := p.Connect(ctx, database, p.Admin)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

package sqlservers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/verifierd/verifierd/internal/testservers"
)

// MariaDB is a MariaDB server started for tests.
type MariaDB struct {
	server
	// Port is the TCP port on 127.0.0.1; Socket is the unix socket's path.
	Port   int
	Socket string
	// Database is created at bootstrap. Admin holds every privilege;
	// Reader holds SELECT on Database only.
	Database      string
	Admin, Reader Account
}

// StartMariaDB installs a data directory in a new folder under parent,
// starts the server and creates the accounts and the database. The
// accounts come from an init file the server runs at every start, so they
// have real passwords and grants (no --skip-grant-tables). On error the
// returned server (when not nil) still has the log; Close removes
// everything.
func StartMariaDB(parent string) (*MariaDB, error) {
	bin, err := exec.LookPath("mariadbd")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/mariadbd"); err != nil {
			return nil, fmt.Errorf("no mariadbd: %w; install the Debian package mariadb-server (scripts/deps.sh)", ErrNotInstalled)
		}
	}
	installDB, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, fmt.Errorf("no mariadb-install-db: %w; install the Debian package mariadb-server (scripts/deps.sh)", ErrNotInstalled)
	}
	cred, uid, gid, err := runAs("mysql", "nobody")
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(parent, "mariadb-", uid, gid)
	if err != nil {
		return nil, err
	}
	port, err := testservers.FreePort()
	if err != nil {
		return nil, err
	}
	m := &MariaDB{
		Port:     port,
		Socket:   filepath.Join(dir, "mariadb.sock"),
		Database: "records",
		Admin:    Account{User: "verifier_admin", Password: testservers.RandomHex(12)},
		Reader:   Account{User: "verifier_reader", Password: testservers.RandomHex(12)},
	}
	data := filepath.Join(dir, "data")
	initFile := filepath.Join(dir, "init.sql")
	// A temporary folder of its own: at start the server deletes every
	// "#sql" file in its tmpdir, which under the shared /tmp were another
	// server's temporary tables while two test packages installed MariaDB
	// at once ("Error on delete of '/tmp/#sql-temptable-…'").
	tmp, err := makeDir(dir, "tmp-", uid, gid)
	if err != nil {
		return nil, err
	}
	m.server = server{
		name:    "mariadb",
		dir:     dir,
		logPath: filepath.Join(dir, "mariadb.log"),
		bin:     bin,
		cred:    cred,
		args: []string{
			"--no-defaults",
			"--datadir=" + data,
			"--tmpdir=" + tmp,
			"--socket=" + m.Socket,
			"--pid-file=" + filepath.Join(dir, "mariadb.pid"),
			"--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1",
			"--skip-name-resolve",
			"--init-file=" + initFile,
			"--log-error=" + filepath.Join(dir, "mariadb.log"),
			// A test server: durability is not under test.
			"--innodb-buffer-pool-size=64M",
			"--innodb-flush-log-at-trx-commit=0",
			"--skip-log-bin",
			"--max-connections=200",
		},
	}
	if err := runTool(cred, dir, installDB, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"); err != nil {
		return m, err
	}
	// Idempotent: the server runs it at every start.
	init := fmt.Sprintf(`CREATE DATABASE IF NOT EXISTS %[1]s;
CREATE USER IF NOT EXISTS '%[2]s'@'%%' IDENTIFIED BY '%[3]s';
GRANT ALL PRIVILEGES ON *.* TO '%[2]s'@'%%' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '%[4]s'@'%%' IDENTIFIED BY '%[5]s';
GRANT SELECT ON %[1]s.* TO '%[4]s'@'%%';
`, m.Database, m.Admin.User, m.Admin.Password, m.Reader.User, m.Reader.Password)
	if err := writeOwned(initFile, []byte(init), uid, gid); err != nil {
		return m, err
	}
	if err := m.Start(); err != nil {
		return m, err
	}
	return m, nil
}

// Start starts the server (again, after Stop) on the same folder and port
// and waits until it accepts connections.
func (m *MariaDB) Start() error {
	if err := m.launch(); err != nil {
		return err
	}
	return m.waitReady(func(ctx context.Context) error {
		db := m.Open("", m.Admin)
		defer db.Close()
		return db.PingContext(ctx)
	})
}

// Stop shuts the server down (SIGTERM: a normal shutdown) and waits for it
// to exit.
func (m *MariaDB) Stop() error { return m.halt(syscall.SIGTERM) }

// Close stops the server and removes its folder.
func (m *MariaDB) Close() error {
	err := m.Stop()
	os.RemoveAll(m.dir)
	return err
}

// Open returns a connection pool over TCP to database (none when empty)
// as account.
func (m *MariaDB) Open(database string, a Account) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = a.User, a.Password
	cfg.Net, cfg.Addr = "tcp", fmt.Sprintf("127.0.0.1:%d", m.Port)
	cfg.DBName = database
	cfg.MultiStatements = false
	connector, _ := mysql.NewConnector(cfg) // only fails on a malformed config
	return sql.OpenDB(connector)
}

// Exec runs each statement as the administrator on Database.
func (m *MariaDB) Exec(ctx context.Context, stmts ...string) error {
	db := m.Open(m.Database, m.Admin)
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

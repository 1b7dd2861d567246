package sql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

const (
	driverSQLite   = "sqlite"
	driverPostgres = "postgres"
	driverMySQL    = "mysql"
)

// driverAliases maps what operators write under sql_driver (including the
// Python kit's DB-API module names) to a driver.
var driverAliases = map[string]string{
	"sqlite": driverSQLite, "sqlite3": driverSQLite,
	"postgres": driverPostgres, "postgresql": driverPostgres, "pgx": driverPostgres, "psycopg": driverPostgres, "psycopg2": driverPostgres,
	"mysql": driverMySQL, "mariadb": driverMySQL, "pymysql": driverMySQL,
}

// config is the adapter's deployment section.
type config struct {
	SQLiteDatabase string                     `json:"sqlite_database"`
	SQLDriver      string                     `json:"sql_driver"`
	SQLQuery       string                     `json:"sql_query"`
	SQLQueryParams map[string]json.RawMessage `json:"sql_query_params"`
	// SQLConnectArgs (host, port, user, database, TLS mode, unix socket)
	// and SQLPasswordEnv are for the server drivers; the sqlite driver
	// accepts and ignores them.
	SQLConnectArgs map[string]any `json:"sql_connect_args"`
	// SQLPasswordEnv is the NAME of the variable; the daemon resolves it
	// and passes the value as the secret slot "sql_password_env".
	SQLPasswordEnv string `json:"sql_password_env"`
	// SQLHiddenRows "accepted" lets the adapter read through a view or a
	// table under row-level security (hidden.go); refused otherwise.
	SQLHiddenRows string `json:"sql_hidden_rows"`
}

// passwordSlot is the secret slot the daemon fills from sql_password_env.
const passwordSlot = "sql_password_env"

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	// Binding binds a call's run parameters as the query's arguments
	// (args), and answers CheckParams with it.
	sdk.Binding[[]any]
	driver string
	reader reader
	query  string       // the operator's query, placeholders in the driver's form
	names  []string     // the placeholders, in the driver's parameter order
	values param.Values // sql_query_params, bound per call
	// hiddenOK: sql_hidden_rows: accepted; hidden caches what the query
	// reads through (hidden.go).
	hiddenOK bool
	hidden   hiddenRows
}

// reader is one driver's way into the system of record. Every method reads
// inside a read-only transaction and is safe for concurrent use.
type reader interface {
	// where names the database for messages, never with a secret.
	where() string
	// read runs query with args, bounded by ctx, and returns its rows.
	// Errors are *connectError when the database could not be reached or
	// refused the login, *timeoutError when the server stopped the query
	// at the statement timeout derived from ctx's deadline.
	read(ctx context.Context, query string, args []any) (rowSource, error)
	// probe is TestConnection: connect, SELECT 1, compile query, and warn
	// when the login could write.
	probe(ctx context.Context, query string, args []any) sdk.TestResult
	// count returns the row count of each table, all read in one
	// read-only transaction.
	count(ctx context.Context, tables []TableName) ([]int64, error)
	// rowFilters says which of names, if any, is a view or a table whose
	// row-level security applies to the login ("" for none; hidden.go).
	rowFilters(ctx context.Context, names []string) (string, error)
	// close releases the connections.
	close()
}

// connectError is a database that could not be reached or refused the
// login: an unreachable capture, never a configuration error.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// timeoutError is a query the server itself stopped at the statement
// timeout derived from the capture's deadline.
type timeoutError struct{ err error }

func (e *timeoutError) Error() string { return e.err.Error() }
func (e *timeoutError) Unwrap() error { return e.err }

// New returns an unconfigured sql adapter, which reads a relational system
// of record with one read-only query; it is the factory for plugin.Serve.
var New = sdk.Define(info, configure)

// Adapter is the adapter New returns; the package's tests load the
// settings its Configure stored.
type Adapter = sdk.Defined[settings]

// Close releases the connections of settings the daemon released or a
// later Configure replaced; reads still streaming from them finish first.
func (s *settings) Close() error {
	go s.reader.close()
	return nil
}

// configure checks the section and the query's parameters and prepares
// the driver; each call binds its run parameters as driver arguments. It does not connect: a server that is down or refuses the
// login is the captures' business, which report it unreachable. For
// SQLite it checks that the file exists and is an SQLite database.
func configure(ctx context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
	driver, err := pickDriver(cfg)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.SQLQuery) == "" {
		return nil, &refusal.Error{Path: "sql_query", Message: "missing: write the one read-only SELECT that returns the records to judge"}
	}
	if err := checkForDriver(cfg.SQLQuery, driver); err != nil {
		if r, ok := errors.AsType[*RefusalError](err); ok {
			return nil, &refusal.Error{Path: "sql_query", Message: r.Message()}
		}
		return nil, err
	}
	values, err := parseParams(cfg.SQLQueryParams)
	if err != nil {
		return nil, err
	}
	query, names, err := translatePlaceholders(cfg.SQLQuery, driverDialect(driver), driver == driverPostgres)
	if err != nil {
		return nil, err
	}
	// Every placeholder has an entry and every entry is used, whatever
	// the values: checked once here, with empty values.
	shape := make(map[string]string, values.Len())
	for _, n := range values.Names() {
		shape[n] = ""
	}
	if _, err := bindArgs(names, shape); err != nil {
		return nil, err
	}
	if cfg.SQLHiddenRows != "" && cfg.SQLHiddenRows != hiddenAccepted {
		return nil, &refusal.Error{Path: "sql_hidden_rows", Message: fmt.Sprintf("write %s (the login sees every row the contracts are about, though the query reads through a view or row-level security), or leave it out", hiddenAccepted)}
	}
	s := &settings{driver: driver, query: query, names: names, values: values, hiddenOK: cfg.SQLHiddenRows == hiddenAccepted}
	s.Binding = s.args
	if s.reader, err = newReader(ctx, cfg, driver, req.Secrets); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeConfig reads the section and picks its driver.
func decodeConfig(raw json.RawMessage) (config, string, error) {
	var cfg config
	if err := (sdk.ConfigureRequest{Kind: Kind, Config: raw}).DecodeConfig(&cfg); err != nil {
		return cfg, "", err
	}
	driver, err := pickDriver(cfg)
	return cfg, driver, err
}

func pickDriver(cfg config) (string, error) {
	name := strings.ToLower(strings.TrimSpace(cfg.SQLDriver))
	if name == "" {
		if cfg.SQLiteDatabase == "" {
			return "", &refusal.Error{Path: "sqlite_database", Message: "missing: name the SQLite database file, or write sql_driver: postgres or mysql with sql_connect_args"}
		}
		return driverSQLite, nil
	}
	driver, ok := driverAliases[name]
	if !ok {
		return "", &refusal.Error{Path: "sql_driver", Message: fmt.Sprintf("unknown driver %q; write postgres, mysql (MySQL and MariaDB) or sqlite", cfg.SQLDriver)}
	}
	if driver == driverSQLite && cfg.SQLiteDatabase == "" {
		return "", &refusal.Error{Path: "sqlite_database", Message: "missing: the sqlite driver reads the database file named here"}
	}
	if driver != driverSQLite && cfg.SQLiteDatabase != "" {
		return "", &refusal.Error{Path: "sqlite_database", Message: fmt.Sprintf("the %s driver reads the server named by sql_connect_args; remove sqlite_database", driver)}
	}
	return driver, nil
}

// driverDialect is how the driver's engine reads quotes, for translating
// placeholders.
func driverDialect(driver string) dialect {
	switch driver {
	case driverPostgres:
		return postgresDialect
	case driverMySQL:
		return mysqlDialect
	}
	return sqliteDialect
}

// newReader prepares the driver's connections without opening any.
func newReader(ctx context.Context, cfg config, driver string, secrets map[string]string) (reader, error) {
	if driver == driverSQLite {
		path, err := filepath.Abs(cfg.SQLiteDatabase)
		if err != nil {
			return nil, &refusal.Error{Path: "sqlite_database", Message: err.Error()}
		}
		if _, err := checkSQLiteFile(path); errors.Is(err, errNoAccess) {
			// Like a password the server refuses: the captures report it.
			sdk.Logger(ctx).Warn("the adapter's user cannot read sqlite_database; captures will be unreachable until it can", "path", path)
		} else if err != nil {
			return nil, &refusal.Error{Path: "sqlite_database", Message: err.Error()}
		}
		if len(cfg.SQLConnectArgs) > 0 || cfg.SQLPasswordEnv != "" {
			sdk.Logger(ctx).Info("sql_connect_args and sql_password_env are ignored by the sqlite driver")
		}
		return &sqliteReader{pool: &pool{path: path}}, nil
	}
	args, err := parseConnectArgs(cfg.SQLConnectArgs, driver)
	if err != nil {
		return nil, err
	}
	password := ""
	if cfg.SQLPasswordEnv != "" {
		v, ok := secrets[passwordSlot]
		if !ok {
			return nil, &refusal.Error{Path: "sql_password_env", Message: fmt.Sprintf("no value for %s reached the adapter; the daemon resolves it from its own environment (allow it under secrets.allow in the daemon config)", cfg.SQLPasswordEnv)}
		}
		password = v
	}
	if driver == driverPostgres {
		return newPostgresReader(ctx, args, password)
	}
	return newMySQLReader(ctx, args, password)
}

// args binds one call's run parameters as the query's arguments.
func (s *settings) args(params map[string]string) ([]any, error) {
	return bindParams(s.values, s.names, params)
}

// TestConnection connects as the configured login, runs SELECT 1 and
// compiles the configured query without running it, all in a read-only
// transaction, and warns when the login could write: the filter and the
// read-only transaction are defence in depth, and the safe setup is a
// login (or, for SQLite, a file) that can only read.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return s.Test(ctx, req, func(ctx context.Context, args []any) (sdk.TestResult, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
		}
		return s.reader.probe(ctx, s.query, args), nil
	})
}

// Read runs the query and streams its rows, afresh in a new transaction
// each time. Anything that stops the read
// from starting (the database down or the login refused, a lock or a query
// still running at the deadline, a query error) is an unreachable capture;
// an error after the first row aborts the stream, so a partial read is
// never judged.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	args, err := s.args(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	var cancel context.CancelFunc
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	if why, err := s.hiddenFilter(ctx); err != nil || why != "" {
		capt := hiddenReason(why)
		if err != nil {
			capt = sdk.Unreachable("%s", unreachableReason(ctx, s.reader.where(), err))
		}
		cancel()
		return capt, nil
	}
	at := time.Now()
	st, err := openRead(ctx, cancel, s.reader, s.query, args)
	if err != nil {
		reason := unreachableReason(ctx, s.reader.where(), err)
		cancel()
		return sdk.Unreachable("%s", reason), nil
	}
	return sdk.Capture{Reachable: true, At: at, Records: st.records()}, nil
}

// openRead runs the query through r and opens its stream. It is the only
// way the adapter runs the operator's SQL.
func openRead(ctx context.Context, cancel context.CancelFunc, r reader, query string, args []any) (*stream, error) {
	src, err := r.read(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return openStream(ctx, cancel, src)
}

func unreachableReason(ctx context.Context, where string, err error) string {
	var te *timeoutError
	var ce *connectError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("reading %s did not finish before the capture deadline; the server stopped the query at its statement timeout", where)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("reading %s did not finish before the capture deadline", where)
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return fmt.Sprintf("reading %s was cancelled", where)
	case errors.As(err, &ce):
		return fmt.Sprintf("cannot read %s: %v", where, ce.err)
	}
	return fmt.Sprintf("sql_query failed on %s: %v", where, err)
}

// statementTimeout is the server-side limit for a statement that must end
// by ctx's deadline: a little earlier, so that the server stops the query
// and says why before the client abandons the connection. It is zero
// (no limit) when ctx has no deadline, and ok is false when the deadline
// leaves no time at all.
func statementTimeout(ctx context.Context) (limit time.Duration, ok bool) {
	deadline, has := ctx.Deadline()
	if !has {
		return 0, true
	}
	left := time.Until(deadline)
	limit = left - min(left/5, 500*time.Millisecond)
	if limit < time.Millisecond {
		return 0, false
	}
	return limit, true
}

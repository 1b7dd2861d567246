package sql

import (
	"context"
	stdsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/verifierd/verifierd/sdk"
)

// Kind is the deployment's `kind:` for this adapter.
const Kind = "sql"

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
	Kind           string                     `json:"kind"`
	SQLiteDatabase string                     `json:"sqlite_database"`
	SQLDriver      string                     `json:"sql_driver"`
	SQLQuery       string                     `json:"sql_query"`
	SQLQueryParams map[string]json.RawMessage `json:"sql_query_params"`
	// SQLConnectArgs (host, port, user, database, TLS mode) and
	// SQLPasswordEnv are for the server drivers; the sqlite driver accepts
	// and ignores them.
	SQLConnectArgs map[string]any `json:"sql_connect_args"`
	SQLPasswordEnv string         `json:"sql_password_env"`
}

var configKeys = []string{"kind", "sqlite_database", "sql_driver", "sql_query", "sql_query_params", "sql_connect_args", "sql_password_env"}

// settings is what Configure resolved; it never changes afterwards.
type settings struct {
	pool     *pool
	driver   string
	database string // absolute path of the SQLite file
	query    string // the operator's query, placeholders translated to '?'
	args     []any  // the bound values, in placeholder order
}

// Adapter reads a relational system of record with one read-only query.
type Adapter struct {
	settings atomic.Pointer[settings]
}

var _ sdk.Adapter = (*Adapter)(nil)

// New returns an unconfigured sql adapter; it is the factory for sdk.Serve.
func New() sdk.Adapter { return &Adapter{} }

// Info describes the adapter. A database read is an independent system of
// record read; whether an effect needs a baseline is the judge's call, and
// a query's result is the whole truth of what it selects, so absence is
// proof.
func (a *Adapter) Info() sdk.Info {
	return sdk.Info{
		Kind:        Kind,
		Tier:        sdk.TierIndependentSystem,
		Description: "one read-only SELECT against a relational database (SQLite today)",
	}
}

// Configure checks the section and binds the query's parameters. It checks
// that the SQLite file exists and is an SQLite database, but does not
// connect: a database that cannot be read later is the captures' business.
func (a *Adapter) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	if err := refuseUnknownKeys(req.Config); err != nil {
		return err
	}
	var cfg config
	if err := req.DecodeConfig(&cfg); err != nil {
		return err
	}
	if cfg.Kind != "" && cfg.Kind != Kind {
		return &sdk.ConfigError{Path: "kind", Message: fmt.Sprintf("this adapter reads kind %q, not %q", Kind, cfg.Kind)}
	}
	driver, err := pickDriver(cfg)
	if err != nil {
		return err
	}
	s := &settings{driver: driver}

	if strings.TrimSpace(cfg.SQLQuery) == "" {
		return &sdk.ConfigError{Path: "sql_query", Message: "missing: write the one read-only SELECT that returns the records to judge"}
	}
	if err := checkForDriver(cfg.SQLQuery, driver); err != nil {
		var r *RefusalError
		if errors.As(err, &r) {
			return &sdk.ConfigError{Path: "sql_query", Message: r.Message()}
		}
		return err
	}
	bound, err := bindParams(cfg.SQLQueryParams, req.Params)
	if err != nil {
		return err
	}
	query, names, err := translatePlaceholders(cfg.SQLQuery, sqliteDialect)
	if err != nil {
		return err
	}
	if s.args, err = bindArgs(names, bound); err != nil {
		return err
	}
	s.query = query

	if s.database, err = filepath.Abs(cfg.SQLiteDatabase); err != nil {
		return &sdk.ConfigError{Path: "sqlite_database", Message: err.Error()}
	}
	if _, err := checkSQLiteFile(s.database); errors.Is(err, errNoAccess) {
		// Like a password the server refuses: the captures report it.
		sdk.Logger(ctx).Warn("the adapter's user cannot read sqlite_database; captures will be unreachable until it can", "path", s.database)
	} else if err != nil {
		return &sdk.ConfigError{Path: "sqlite_database", Message: err.Error()}
	}
	if len(cfg.SQLConnectArgs) > 0 || cfg.SQLPasswordEnv != "" {
		sdk.Logger(ctx).Info("sql_connect_args and sql_password_env are ignored by the sqlite driver")
	}
	s.pool = &pool{path: s.database}
	a.settings.Store(s)
	return nil
}

func refuseUnknownKeys(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var section map[string]json.RawMessage
	if err := json.Unmarshal(raw, &section); err != nil {
		return &sdk.ConfigError{Message: "the section must be a map: " + err.Error()}
	}
	for _, k := range sortedKeys(section) {
		known := false
		for _, c := range configKeys {
			known = known || k == c
		}
		if !known {
			return &sdk.ConfigError{Path: k, Message: "unknown key for kind sql; the keys are " + strings.Join(configKeys[1:], ", ")}
		}
	}
	return nil
}

func pickDriver(cfg config) (string, error) {
	name := strings.ToLower(strings.TrimSpace(cfg.SQLDriver))
	if name == "" {
		if cfg.SQLiteDatabase == "" {
			return "", &sdk.ConfigError{Path: "sqlite_database", Message: "missing: name the SQLite database file (sql_driver defaults to sqlite)"}
		}
		return driverSQLite, nil
	}
	driver, ok := driverAliases[name]
	if !ok {
		return "", &sdk.ConfigError{Path: "sql_driver", Message: fmt.Sprintf("unknown driver %q; write sqlite", cfg.SQLDriver)}
	}
	if driver != driverSQLite {
		return "", &sdk.ConfigError{Path: "sql_driver", Message: fmt.Sprintf("%s is not built yet: this verifierd reads SQLite only (sql_driver: sqlite with sqlite_database: PATH)", cfg.SQLDriver)}
	}
	if cfg.SQLiteDatabase == "" {
		return "", &sdk.ConfigError{Path: "sqlite_database", Message: "missing: the sqlite driver reads the database file named here"}
	}
	return driver, nil
}

var errNotConfigured = errors.New("sql adapter: called before Configure")

// TestConnection opens the database read-only, runs SELECT 1, compiles the
// configured query without running it, and warns when the file could be
// written through: the read-only connection is defence in depth, and the
// safe setup is a file the daemon's user cannot write.
func (a *Adapter) TestConnection(ctx context.Context) (sdk.TestResult, error) {
	s := a.settings.Load()
	if s == nil {
		return sdk.TestResult{}, errNotConfigured
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	start := time.Now()
	db, fi, err := s.pool.get()
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: time.Since(start)}, nil
	}
	tx, err := db.BeginTx(ctx, &stdsql.TxOptions{ReadOnly: true})
	if err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("opening %s read-only failed: %v", s.database, err), Latency: time.Since(start)}, nil
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("SELECT 1 on %s failed: %v", s.database, err), Latency: time.Since(start)}, nil
	}
	latency := time.Since(start)
	res := sdk.TestResult{Reachable: true, Latency: latency}
	stmt, err := tx.PrepareContext(ctx, s.query)
	if err != nil {
		res.Reachable = false
		res.Message = fmt.Sprintf("%s opened read-only, but sql_query does not compile against it: %v", s.database, err)
		return res, nil
	}
	stmt.Close()
	res.Message = fmt.Sprintf("%s opened read-only; SELECT 1 answered in %s and sql_query compiles", s.database, latency.Round(time.Microsecond))
	if perm := fi.Mode().Perm(); perm&0o222 != 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"%s is writable (mode %04o): the adapter only opens it read-only, but point sqlite_database at a read-only copy, or remove write permission for the daemon's user (chmod a-w), so that nothing running as that user can change the system of record",
			s.database, perm))
	}
	return res, nil
}

// CaptureBefore reads the query's rows before the automation acts.
func (a *Adapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

// CaptureAfter reads the query's rows afresh in a new transaction each time.
func (a *Adapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

// capture runs the query and streams its rows. Anything that stops the read
// from starting (the file gone or replaced, a lock held past the deadline,
// a query error) is an unreachable capture; an error after the first row
// aborts the stream, so a partial read is never judged.
func (a *Adapter) capture(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	s := a.settings.Load()
	if s == nil {
		return sdk.Capture{}, errNotConfigured
	}
	var cancel context.CancelFunc
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	at := time.Now()
	db, _, err := s.pool.get()
	if err != nil {
		cancel()
		return sdk.Unreachable("sqlite_database: %v", err), nil
	}
	cur, err := runQuery(ctx, cancel, db, s.query, s.args)
	if err != nil {
		reason := unreachableReason(ctx, s.database, err)
		cancel()
		return sdk.Unreachable("%s", reason), nil
	}
	return sdk.Capture{Reachable: true, At: at, Records: cur.records()}, nil
}

func unreachableReason(ctx context.Context, path string, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("reading %s did not finish before the capture deadline", path)
	}
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return fmt.Sprintf("reading %s was cancelled", path)
	}
	return fmt.Sprintf("sql_query failed on %s: %v", path, err)
}

package sql

import (
	"context"
	stdsql "database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/verifierd/verifierd/sdk"
)

// sqliteHeader opens every SQLite 3 database file. Checking it before
// opening refuses a JSON or CSV export renamed to .db, which SQLite would
// otherwise report only at the first read, or (for an empty file) take for
// an empty database.
const sqliteHeader = "SQLite format 3\x00"

// errNoAccess is a database file the adapter's user may not read. File
// permissions are SQLite's only access control, so this is SQLite's
// "credentials refused": an outage for the captures, not a malformed
// configuration.
var errNoAccess = errors.New("permission denied")

// checkSQLiteFile returns nil when path is a regular file that starts with
// the SQLite header, and otherwise an error saying what it is instead.
func checkSQLiteFile(path string) (fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", path)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("%s cannot be read by the adapter's user: %w", path, errNoAccess)
		}
		return nil, fmt.Errorf("%s cannot be opened: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be examined: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s cannot be read: %v", path, err)
	}
	if n < len(head) || string(head) != sqliteHeader {
		return nil, fmt.Errorf("%s is not an SQLite 3 database (its first 16 bytes are not the SQLite header); point sqlite_database at the database file itself", path)
	}
	return fi, nil
}

// sqliteDSN is the read-only connection string for path: the file opened
// with mode=ro (SQLite refuses every write to it and never creates it),
// query_only on every connection, and trusted_schema off so that views and
// triggers in the file cannot call functions with side effects. The busy
// timeout is only a ceiling: a wait for a writer's lock ends as soon as
// the capture's context does.
func sqliteDSN(path string) string {
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + escaped + "?mode=ro" +
		"&_pragma=query_only(1)" +
		"&_pragma=trusted_schema(0)" +
		"&_pragma=busy_timeout(" + strconv.FormatInt(maxBusyWait.Milliseconds(), 10) + ")"
}

const maxBusyWait = time.Minute

// openReadOnly opens a connection pool on the database at path, read-only.
func openReadOnly(path string) *stdsql.DB {
	db, _ := stdsql.Open("sqlite", sqliteDSN(path)) // only fails for an unknown driver
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return db
}

// pool keeps a read-only connection pool on the configured file for as
// long as the path names the same file. Reusing connections keeps a small
// read well under a millisecond (opening one and loading the schema cost
// more than the read), and SQLite revalidates its cache at every
// transaction, so each capture still reads the file afresh.
type pool struct {
	path string

	mu   sync.Mutex
	db   *stdsql.DB
	file fs.FileInfo // the file db was opened on
	// stmts are queries prepared on db (at most maxPreparedStatements),
	// kept with it: database/sql keeps each one prepared on every
	// connection that ran it, so a capture runs its query without
	// compiling it again. SQLite re-prepares a statement whose schema
	// changed before it steps it, so a kept statement reads as a new one
	// would.
	stmts map[string]*stdsql.Stmt
}

// maxPreparedStatements bounds the queries a pool keeps prepared; a pool
// serves one instance, whose reads use one or two queries.
const maxPreparedStatements = 8

// get checks that path still names an SQLite database and returns a pool
// on it. A file deleted, renamed or replaced since the last capture gets a
// new pool: a connection still open on the old file would read a file that
// is no longer the system of record.
func (p *pool) get() (*stdsql.DB, fs.FileInfo, error) {
	fi, err := checkSQLiteFile(p.path)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db != nil && os.SameFile(p.file, fi) {
		return p.db, fi, nil
	}
	if p.db != nil {
		// Close waits for reads still streaming from the old file.
		go p.db.Close()
	}
	p.db, p.file, p.stmts = openReadOnly(p.path), fi, nil
	return p.db, fi, nil
}

// prepared returns query prepared on db, preparing it the first time;
// nil when db is no longer the pool's, when the pool keeps as many
// statements as it may, or when preparing fails (the caller then runs the
// query unprepared, which reports the same failure).
func (p *pool) prepared(ctx context.Context, db *stdsql.DB, query string) *stdsql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db != db {
		return nil
	}
	if st, ok := p.stmts[query]; ok {
		return st
	}
	if len(p.stmts) >= maxPreparedStatements {
		return nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if p.stmts == nil {
		p.stmts = map[string]*stdsql.Stmt{}
	}
	p.stmts[query] = st
	return st
}

// sqliteReader reads an SQLite file through its read-only pool.
type sqliteReader struct {
	pool *pool
}

func (r *sqliteReader) where() string { return r.pool.path }

func (r *sqliteReader) close() {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	if r.pool.db != nil {
		r.pool.db.Close()
		r.pool.db, r.pool.stmts = nil, nil
	}
}

// read runs query with args in a read-only transaction on a connection
// that is read-only itself (mode=ro, query_only), whatever the query says.
func (r *sqliteReader) read(ctx context.Context, query string, args []any) (rowSource, error) {
	db, _, err := r.pool.get()
	if err != nil {
		return nil, &connectError{err: err}
	}
	return readDB(ctx, db, query, args, sqliteConvert, r.pool.prepared(ctx, db, query))
}

// readDB begins a read-only transaction on a connection of db and runs
// query in it, through stmt (query prepared on db) when it is not nil. On
// an error everything it opened is released.
func readDB(ctx context.Context, db *stdsql.DB, query string, args []any, convertFor func(*stdsql.ColumnType) func(any) any, stmt *stdsql.Stmt) (rowSource, error) {
	tx, err := db.BeginTx(ctx, &stdsql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	var rows *stdsql.Rows
	if stmt != nil {
		// The transaction's own statement: the one prepared on this
		// connection when there is one, closed with the transaction.
		rows, err = tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
	} else {
		rows, err = tx.QueryContext(ctx, query, args...)
	}
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	r, err := newDBRows(nil, tx, rows, convertFor)
	if err != nil {
		(&dbRows{tx: tx, rows: rows}).close()
		return nil, err
	}
	return r, nil
}

func sqliteConvert(*stdsql.ColumnType) func(any) any { return jsonValue }

// probe opens the database read-only, runs SELECT 1, compiles the
// configured query without running it, and warns when the file could be
// written through: the read-only connection is defence in depth, and the
// safe setup is a file the daemon's user cannot write.
func (r *sqliteReader) probe(ctx context.Context, query string, _ []any) sdk.TestResult {
	start := time.Now()
	path := r.pool.path
	db, fi, err := r.pool.get()
	if err != nil {
		return sdk.TestResult{Message: err.Error(), Latency: time.Since(start)}
	}
	tx, err := db.BeginTx(ctx, &stdsql.TxOptions{ReadOnly: true})
	if err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("opening %s read-only failed: %v", path, err), Latency: time.Since(start)}
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("SELECT 1 on %s failed: %v", path, err), Latency: time.Since(start)}
	}
	latency := time.Since(start)
	res := sdk.TestResult{Reachable: true, Latency: latency}
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		res.Reachable = false
		res.Message = fmt.Sprintf("%s opened read-only, but sql_query does not compile against it: %v", path, err)
		return res
	}
	stmt.Close()
	res.Message = fmt.Sprintf("%s opened read-only; SELECT 1 answered in %s and sql_query compiles", path, latency.Round(time.Microsecond))
	// Whether the daemon's user may write the file is the kernel's answer
	// for this process (writableByProcess), not the mode bits: root
	// writes a 0444 file.
	if writableByProcess(path) {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"%s is writable by the daemon's user (uid %d; mode %04o): the adapter only opens it read-only, but point sqlite_database at a read-only copy, or run the daemon as a user that cannot write it (for root, mode bits are not enough), so that nothing running as that user can change the system of record",
			path, os.Geteuid(), fi.Mode().Perm()))
	}
	return res
}

// count reads the row count of each table in one read-only transaction.
func (r *sqliteReader) count(ctx context.Context, tables []TableName) ([]int64, error) {
	db, _, err := r.pool.get()
	if err != nil {
		return nil, &connectError{err: err}
	}
	tx, err := db.BeginTx(ctx, &stdsql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return countIn(ctx, tables, `"`, func(q string) (int64, error) {
		var n int64
		err := tx.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	})
}

// jsonValue maps an SQLite value to its record value: NULL to null,
// INTEGER to a JSON integer, REAL to its shortest decimal text, TEXT to a
// string, BLOB to base64. SQLite has no boolean type; booleans are the
// integers 0 and 1 and stay so. A TEXT value in a column declared DATE,
// DATETIME or TIMESTAMP that the driver parses as a time becomes RFC 3339
// in UTC.
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64, string:
		// Passed on as they came, in the interface the driver filled: no
		// copy and no allocation per value (the SDK writes an int64 as
		// its digits, exactly as json.Number would carry them).
		return v
	case float64:
		return floatValue(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case bool:
		if x {
			return json.Number("1")
		}
		return json.Number("0")
	default:
		return fmt.Sprint(x)
	}
}

// float32Value is floatValue for a single-precision float: the shortest
// text that reads back as the same float32 (1.1, not 1.100000023841858).
func float32Value(f float32) any {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return floatValue(float64(f))
	}
	b, err := json.Marshal(f)
	if err != nil {
		return strconv.FormatFloat(float64(f), 'g', -1, 32)
	}
	return json.Number(b)
}

// floatValue is the shortest text that reads back as f, spelt as JSON spells
// numbers. SQLite can store infinities, which JSON cannot carry as numbers:
// they become the strings "Infinity" and "-Infinity".
func floatValue(f float64) any {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return json.Number(b)
}

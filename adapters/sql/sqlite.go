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
}

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
	p.db, p.file = openReadOnly(p.path), fi
	return p.db, fi, nil
}

// cursor is one query running inside a read-only transaction. Rows are
// converted one at a time as they are consumed, so a read of any size is
// never held whole.
type cursor struct {
	tx      *stdsql.Tx
	rows    *stdsql.Rows
	columns []string
	// first is the row read when the query started: reading it surfaces
	// errors (a lock, a missing table) before the capture is reported
	// reachable.
	first    sdk.Record
	hasFirst bool

	ctx       context.Context
	closeOnce sync.Once
	stop      func() bool // unregisters the context hook
	cancel    context.CancelFunc
	used      sync.Once
}

// runQuery runs query with args in a read-only transaction on db. It is
// the only way the adapter executes SQL, on connections that are read-only
// themselves, whatever the query says. ctx bounds the whole read; cancel is
// called when the returned cursor closes (on an error, the caller still
// owns it).
func runQuery(ctx context.Context, cancel context.CancelFunc, db *stdsql.DB, query string, args []any) (*cursor, error) {
	c := &cursor{ctx: ctx}
	if err := c.start(ctx, db, query, args); err != nil {
		c.close()
		return nil, err
	}
	c.cancel = cancel
	// database/sql rolls the transaction back and closes its rows when ctx
	// ends; the hook does it too, so the connection returns to the pool
	// even if nobody ever consumes the records.
	c.stop = context.AfterFunc(ctx, c.close)
	return c, nil
}

func (c *cursor) start(ctx context.Context, db *stdsql.DB, query string, args []any) error {
	var err error
	if c.tx, err = db.BeginTx(ctx, &stdsql.TxOptions{ReadOnly: true}); err != nil {
		return err
	}
	if c.rows, err = c.tx.QueryContext(ctx, query, args...); err != nil {
		return err
	}
	if c.columns, err = c.rows.Columns(); err != nil {
		return err
	}
	if err = uniqueColumns(c.columns); err != nil {
		return err
	}
	if c.rows.Next() {
		if c.first, err = c.scan(); err != nil {
			return err
		}
		c.hasFirst = true
	} else if err = c.rows.Err(); err != nil {
		return err
	}
	return nil
}

func uniqueColumns(cols []string) error {
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		if seen[c] {
			return fmt.Errorf("the query returns two columns named %q; give them distinct names with AS", c)
		}
		seen[c] = true
	}
	return nil
}

// records streams the cursor's rows and closes it at the end, on an error,
// or when the consumer stops early.
func (c *cursor) records() sdk.RecordSource {
	return func(yield func(sdk.Record, error) bool) {
		first := false
		c.used.Do(func() { first = true })
		if !first {
			yield(nil, errors.New("sql: a capture's records can be read once"))
			return
		}
		defer func() {
			c.stop()
			c.close()
		}()
		if c.hasFirst && !yield(c.first, nil) {
			return
		}
		c.first = nil
		for c.rows.Next() {
			rec, err := c.scan()
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		if err := c.rows.Err(); err != nil {
			// The header already said reachable; an error now aborts the
			// capture and the daemon discards every record of it.
			yield(nil, fmt.Errorf("reading the query's rows: %w", err))
			return
		}
		// Rows closed because the deadline passed end like a finished
		// result set; only the context tells them apart.
		if err := c.ctx.Err(); err != nil {
			yield(nil, fmt.Errorf("reading the query's rows: %w", err))
		}
	}
}

func (c *cursor) scan() (sdk.Record, error) {
	vals := make([]any, len(c.columns))
	ptrs := make([]any, len(c.columns))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := c.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	rec := make(sdk.Record, len(c.columns))
	for i, name := range c.columns {
		rec[name] = jsonValue(vals[i])
	}
	return rec, nil
}

func (c *cursor) close() {
	c.closeOnce.Do(func() {
		if c.rows != nil {
			c.rows.Close()
		}
		if c.tx != nil {
			c.tx.Rollback()
		}
		if c.cancel != nil {
			c.cancel()
		}
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
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float64:
		return floatValue(x)
	case string:
		return x
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

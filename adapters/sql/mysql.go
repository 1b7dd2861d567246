package sql

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// mysqlReader reads MySQL or MariaDB through go-sql-driver/mysql. Each read
// pins a connection, sets the server's statement time limit on it, puts
// the session itself in read-only mode, and runs the query inside START
// TRANSACTION READ ONLY. The session mode matters: a DDL statement commits
// the open transaction implicitly and would run outside it; in a read-only
// session the server refuses it too. Parameters travel as the parameters
// of a server-side prepared statement (InterpolateParams is off), never
// spliced into the text.
type mysqlReader struct {
	db   *stdsql.DB
	desc string
	args connectArgs
	// flavor is learnt at the first connection: the two servers name their
	// statement time limit differently.
	flavor atomic.Int32
}

const (
	flavorUnknown int32 = iota
	flavorMariaDB
	flavorMySQL
)

func newMySQLReader(ctx context.Context, a connectArgs, password string) (reader, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = a.user, password
	if a.socket != "" {
		cfg.Net, cfg.Addr = "unix", a.socket
	} else {
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(a.host, strconv.Itoa(a.port))
	}
	cfg.DBName = a.database
	var err error
	if cfg.TLS, err = a.tlsConfig(); err != nil {
		return nil, err
	}
	cfg.Timeout = a.timeout
	// TIMESTAMP values are sent in the session's time zone: UTC.
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	cfg.InterpolateParams = false
	cfg.MultiStatements = false
	cfg.AllowAllFiles = false
	cfg.ParseTime = false
	cfg.Logger = driverLogger{sdk.Logger(ctx).Named("mysql-driver")}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, &refusal.Error{Path: "sql_connect_args", Message: err.Error()}
	}
	db := stdsql.OpenDB(connector)
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return &mysqlReader{db: db, desc: a.describe(driverMySQL), args: a}, nil
}

// driverLogger sends the driver's own messages (a broken idle connection
// and the like) to the adapter's log.
type driverLogger struct{ l hclog.Logger }

func (d driverLogger) Print(v ...any) { d.l.Debug(strings.TrimSpace(fmt.Sprint(v...))) }

func (r *mysqlReader) where() string { return r.desc }

func (r *mysqlReader) close() { r.db.Close() }

// begin pins a connection, sets its statement time limit from ctx's
// deadline and its session to read-only, and starts a read-only
// transaction with opts.
func (r *mysqlReader) begin(ctx context.Context, opts *stdsql.TxOptions) (*stdsql.Conn, *stdsql.Tx, error) {
	limit, ok := statementTimeout(ctx)
	if !ok {
		return nil, nil, context.DeadlineExceeded
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, nil, classifyMySQL(ctx, err, true)
	}
	if err := r.prepareSession(ctx, conn, limit); err != nil {
		conn.Close()
		return nil, nil, classifyMySQL(ctx, err, true)
	}
	tx, err := conn.BeginTx(ctx, opts)
	if err != nil {
		conn.Close()
		return nil, nil, classifyMySQL(ctx, err, true)
	}
	return conn, tx, nil
}

// prepareSession sets the session's statement time limit, MariaDB's
// max_statement_time (seconds) or MySQL's max_execution_time
// (milliseconds, SELECT only), 0 lifting it, and makes every transaction
// of the session read-only.
func (r *mysqlReader) prepareSession(ctx context.Context, conn *stdsql.Conn, limit time.Duration) error {
	flavor := r.flavor.Load()
	if flavor == flavorUnknown {
		var version string
		if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return err
		}
		flavor = flavorMySQL
		if strings.Contains(strings.ToLower(version), "mariadb") {
			flavor = flavorMariaDB
		}
		r.flavor.Store(flavor)
	}
	var stmt string
	if flavor == flavorMariaDB {
		stmt = "SET SESSION max_statement_time = " + strconv.FormatFloat(limit.Seconds(), 'f', 3, 64)
	} else {
		stmt = "SET SESSION max_execution_time = " + strconv.FormatInt(limit.Milliseconds(), 10)
	}
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION READ ONLY")
	return err
}

// readOnlyTx is START TRANSACTION READ ONLY: the server refuses any write
// to a table in it, whatever the statement.
var readOnlyTx = &stdsql.TxOptions{ReadOnly: true}

func (r *mysqlReader) read(ctx context.Context, query string, args []any) (rowSource, error) {
	conn, tx, err := r.begin(ctx, readOnlyTx)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		tx.Rollback()
		conn.Close()
		return nil, classifyMySQL(ctx, err, false)
	}
	src, err := newDBRows(conn, tx, rows, mysqlConvert)
	if err != nil {
		(&dbRows{conn: conn, tx: tx, rows: rows}).close()
		return nil, err
	}
	return &mysqlRows{dbRows: src, ctx: ctx}, nil
}

// mysqlRows streams a result: the driver reads each row off the connection
// as it is asked for.
type mysqlRows struct {
	*dbRows
	ctx context.Context
}

func (m *mysqlRows) next() (sdk.Record, bool, error) {
	rec, ok, err := m.dbRows.next()
	return rec, ok, classifyMySQL(m.ctx, err, false)
}

// MySQL and MariaDB error numbers the adapter sorts.
const (
	erDBAccessDenied   = 1044
	erAccessDenied     = 1045
	erBadDB            = 1049
	erTooManyConns     = 1040
	erHostBlocked      = 1129
	erHostNotAllowed   = 1130
	erMariaDBStmtTime  = 1969 // max_statement_time exceeded
	erMySQLExecTimeout = 3024 // max_execution_time exceeded
	erServerShutdown   = 1053
	erConnKilled       = 1927
	erReadOnlyTx       = 1792 // both servers: "Cannot execute statement in a READ ONLY transaction"
)

func classifyMySQL(ctx context.Context, err error, connecting bool) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch me.Number {
		case erMariaDBStmtTime, erMySQLExecTimeout:
			return &timeoutError{err: err}
		case erAccessDenied, erDBAccessDenied, erBadDB, erTooManyConns, erHostBlocked, erHostNotAllowed, erServerShutdown, erConnKilled:
			return &connectError{err: err}
		}
		if !connecting {
			return err
		}
	}
	var ne net.Error
	if connecting || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne) {
		return &connectError{err: err}
	}
	return err
}

// mysqlConvert picks a column's conversion from the type the server
// declares for it. The text protocol (a query without parameters) sends
// every value as text; the binary one (with parameters) sends integers and
// floats as numbers; both come out the same.
func mysqlConvert(ct *stdsql.ColumnType) func(any) any {
	typ := strings.TrimPrefix(ct.DatabaseTypeName(), "UNSIGNED ")
	switch typ {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		return mysqlInteger
	case "FLOAT":
		return mysqlFloat(32)
	case "DOUBLE":
		return mysqlFloat(64)
	case "BIT":
		return mysqlBit
	case "DATETIME", "TIMESTAMP":
		return mysqlDateTime
	case "JSON":
		return mysqlJSON
	case "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "GEOMETRY", "VECTOR":
		return mysqlBytes
	}
	// DECIMAL (the server's exact decimal text), DATE (YYYY-MM-DD), TIME,
	// CHAR, VARCHAR, TEXT, ENUM, SET.
	return mysqlText
}

func mysqlText(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return string(x)
	case string:
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func mysqlInteger(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		return intNumber(x)
	case uint64:
		return json.Number(strconv.FormatUint(x, 10))
	case []byte:
		s := string(x)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(s)
		}
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return json.Number(s)
		}
		return s
	}
	return mysqlText(v)
}

func mysqlFloat(bits int) func(any) any {
	return func(v any) any {
		switch x := v.(type) {
		case nil:
			return nil
		case float32:
			return float32Value(x)
		case float64:
			if bits == 32 {
				return float32Value(float32(x))
			}
			return floatValue(x)
		case []byte:
			f, err := strconv.ParseFloat(string(x), bits)
			if err != nil {
				return string(x)
			}
			if bits == 32 {
				return float32Value(float32(f))
			}
			return floatValue(f)
		}
		return mysqlText(v)
	}
}

// mysqlBit reads BIT(n) as the unsigned integer its bits spell.
func mysqlBit(v any) any {
	b, ok := v.([]byte)
	if !ok || len(b) > 8 {
		return mysqlText(v)
	}
	var buf [8]byte
	copy(buf[8-len(b):], b)
	return json.Number(strconv.FormatUint(binary.BigEndian.Uint64(buf[:]), 10))
}

// mysqlDateTime reads DATETIME and TIMESTAMP as RFC 3339 in UTC: TIMESTAMP
// comes in the session's time zone, set to UTC on every connection, and
// DATETIME, which has no zone, is read as UTC. A zero date stays as the
// server spells it.
func mysqlDateTime(v any) any {
	var s string
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		s = string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return mysqlText(v)
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", s, time.UTC)
	if err != nil {
		return s
	}
	return t.Format(time.RFC3339Nano)
}

// mysqlJSON nests a MySQL JSON column's document. (MariaDB's JSON is
// LONGTEXT on the wire and arrives as text.)
func mysqlJSON(v any) any {
	b, ok := v.([]byte)
	if !ok {
		return mysqlText(v)
	}
	if !json.Valid(b) {
		return string(b)
	}
	return json.RawMessage(append([]byte(nil), b...))
}

func mysqlBytes(v any) any {
	b, ok := v.([]byte)
	if !ok {
		return mysqlText(v)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// probe connects, checks the query compiles, and reads the login's grants.
func (r *mysqlReader) probe(ctx context.Context, query string, _ []any) sdk.TestResult {
	start := time.Now()
	conn, tx, err := r.begin(ctx, readOnlyTx)
	if err != nil {
		return sdk.TestResult{Message: unreachableReason(ctx, r.desc, err), Latency: time.Since(start)}
	}
	defer conn.Close()
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("SELECT 1 on %s failed: %v", r.desc, err), Latency: time.Since(start)}
	}
	latency := time.Since(start)
	res := sdk.TestResult{Reachable: true, Latency: latency}
	// Prepared on the server (parsed, never run) and closed at once.
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		res.Reachable = false
		res.Message = fmt.Sprintf("connected to %s, but sql_query does not compile there: %v", r.desc, err)
		return res
	}
	stmt.Close()
	res.Message = fmt.Sprintf("connected to %s (TLS: %s) in a read-only transaction; SELECT 1 answered in %s and sql_query compiles",
		r.desc, r.args.tlsMode, latency.Round(time.Microsecond))
	res.Warnings = append(res.Warnings, r.writeWarnings(ctx, tx)...)
	if r.args.tlsMode == tlsDisable && r.args.socket == "" && !isLoopback(r.args.host) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("TLS is disabled to %s, which is not on this machine: set sql_connect_args.sslmode: verify-full", r.args.host))
	}
	return res
}

// writingPrivileges are grants that let a login change data, the schema or
// files on the server.
var writingPrivileges = setOf("ALL", "ALL PRIVILEGES", "INSERT", "UPDATE", "DELETE", "DELETE HISTORY",
	"DROP", "ALTER", "CREATE", "FILE", "SUPER")

// writeWarnings reads SHOW GRANTS and names the grants that can write.
func (r *mysqlReader) writeWarnings(ctx context.Context, tx *stdsql.Tx) []string {
	rows, err := tx.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return []string{fmt.Sprintf("could not read the grants of %s: %v", r.args.user, err)}
	}
	defer rows.Close()
	var writing []string
	for rows.Next() {
		var grant string
		if err := rows.Scan(&grant); err != nil {
			return []string{fmt.Sprintf("could not read the grants of %s: %v", r.args.user, err)}
		}
		if grantWrites(grant) {
			writing = append(writing, grant)
		}
	}
	if err := rows.Err(); err != nil {
		return []string{fmt.Sprintf("could not read the grants of %s: %v", r.args.user, err)}
	}
	if len(writing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s holds grants that can write (%s): the adapter only reads, in read-only transactions, but give it a login with SELECT only, so that nothing logged in as it can change the system of record",
		r.args.user, strings.Join(writing, "; "))}
}

// grantWrites reports whether one SHOW GRANTS line ("GRANT SELECT, INSERT
// ON `db`.* TO ...") holds a writing privilege. Column lists are ignored:
// UPDATE (note) still writes.
func grantWrites(grant string) bool {
	upper := strings.ToUpper(grant)
	if !strings.HasPrefix(upper, "GRANT ") {
		return false
	}
	privs, _, ok := strings.Cut(upper[len("GRANT "):], " ON ")
	if !ok {
		return false // a role grant: its privileges are listed on their own lines
	}
	depth := 0
	var cur strings.Builder
	check := func() bool {
		p := strings.Join(strings.Fields(cur.String()), " ")
		cur.Reset()
		return writingPrivileges[p]
	}
	for _, c := range privs {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			if check() {
				return true
			}
		case depth == 0:
			cur.WriteRune(c)
		}
	}
	return check()
}

// count reads every count in one REPEATABLE READ, READ ONLY transaction:
// one consistent snapshot (InnoDB) for all tables.
func (r *mysqlReader) count(ctx context.Context, tables []TableName) ([]int64, error) {
	conn, tx, err := r.begin(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	counts, err := countIn(ctx, tables, "`", func(q string) (int64, error) {
		var n int64
		err := tx.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	})
	return counts, classifyMySQL(ctx, err, false)
}

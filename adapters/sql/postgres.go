package sql

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pgReader reads PostgreSQL through pgx's own protocol implementation (not
// database/sql): a small pool of connections, each read in a READ ONLY
// transaction with a statement timeout, rows decoded from their wire bytes.
type pgReader struct {
	pool *pgxpool.Pool
	desc string
	args connectArgs
}

// newPostgresReader prepares a pool; it connects at the first read.
func newPostgresReader(ctx context.Context, a connectArgs, password string) (reader, error) {
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, &refusal.Error{Path: "sql_connect_args", Message: err.Error()}
	}
	if err := setPGConn(cfg.ConnConfig, a, password); err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = time.Minute
	cfg.HealthCheckPeriod = 30 * time.Second
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &refusal.Error{Path: "sql_connect_args", Message: err.Error()}
	}
	return &pgReader{pool: p, desc: a.describe(driverPostgres), args: a}, nil
}

// setPGConn sets every connection setting of cc from a: ParseConfig("")
// fills pgx's defaults first, so neither the environment nor a .pgpass
// file can redirect the connection.
func setPGConn(cc *pgx.ConnConfig, a connectArgs, password string) error {
	cc.Host, cc.Port = a.host, uint16(a.port)
	if a.socket != "" {
		// libpq's convention: the folder holding .s.PGSQL.<port>. A path to
		// the socket file itself is accepted too.
		cc.Host = a.socket
		if base := filepath.Base(a.socket); strings.HasPrefix(base, ".s.PGSQL.") {
			port, err := strconv.Atoi(strings.TrimPrefix(base, ".s.PGSQL."))
			if err != nil || port < 1 || port > 65535 {
				return &refusal.Error{Path: "sql_connect_args.unix_socket", Message: "write the folder holding the server's socket, or the socket .s.PGSQL.<port> itself"}
			}
			cc.Host, cc.Port = filepath.Dir(a.socket), uint16(port)
		}
	}
	cc.Database, cc.User, cc.Password = a.database, a.user, password
	var err error
	if cc.TLSConfig, err = a.tlsConfig(); err != nil {
		return err
	}
	cc.Fallbacks = nil
	cc.ConnectTimeout = a.timeout
	cc.RuntimeParams = map[string]string{"application_name": "verifierd-sql"}
	// A context that ends mid-query sends the server a cancel request, so
	// the query stops there too, and drops the connection a second later
	// if the server does not answer.
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
	}
	return nil
}

// PostgresConnConfig is the connection a sql section's sql_connect_args
// (raw, as the deployment writes them) and password open, exactly as the
// adapter opens it: the daemon's write-set source (internal/changes)
// connects with it. A refusal is an *refusal.Error naming the key.
func PostgresConnConfig(raw map[string]any, password string) (*pgx.ConnConfig, error) {
	a, err := parseConnectArgs(raw, driverPostgres)
	if err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig("")
	if err != nil {
		return nil, &refusal.Error{Path: "sql_connect_args", Message: err.Error()}
	}
	if err := setPGConn(cc, a, password); err != nil {
		return nil, err
	}
	cc.RuntimeParams["application_name"] = "verifierd-changes"
	return cc, nil
}

func (r *pgReader) where() string { return r.desc }

func (r *pgReader) close() { r.pool.Close() }

// begin acquires a connection and opens a transaction on it with opts and
// a statement timeout derived from ctx's deadline.
func (r *pgReader) begin(ctx context.Context, opts pgx.TxOptions) (*pgxpool.Conn, pgx.Tx, error) {
	limit, ok := statementTimeout(ctx)
	if !ok {
		return nil, nil, context.DeadlineExceeded
	}
	var conn *pgxpool.Conn
	var tx pgx.Tx
	for attempt := 0; ; attempt++ {
		var err error
		if conn, err = r.pool.Acquire(ctx); err != nil {
			return nil, nil, classifyPG(ctx, err, true)
		}
		if tx, err = conn.BeginTx(ctx, opts); err == nil {
			break
		}
		// Beginning needs nothing but a working connection. A pooled one
		// the server dropped since (a restart, a failover) is discarded
		// and a fresh one tried, once.
		closed := conn.Conn().IsClosed()
		conn.Release()
		if !closed || attempt > 0 || ctx.Err() != nil {
			return nil, nil, classifyPG(ctx, err, true)
		}
	}
	if limit > 0 {
		// SET LOCAL, as a function so the statement is prepared once.
		ms := strconv.FormatInt(max(limit.Milliseconds(), 1), 10)
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('statement_timeout', $1, true)", ms); err != nil {
			r.end(ctx, conn, tx)
			return nil, nil, classifyPG(ctx, err, true)
		}
	}
	return conn, tx, nil
}

// end rolls the transaction back and returns the connection. The rollback
// runs even when ctx has ended, so that the connection goes back to the
// pool clean; a connection that cannot be rolled back is discarded by the
// pool.
func (r *pgReader) end(ctx context.Context, conn *pgxpool.Conn, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	tx.Rollback(rctx)
	cancel()
	conn.Release()
}

// readOnly is the access mode of every transaction the adapter opens:
// PostgreSQL refuses any write in it, whatever the statement.
var readOnly = pgx.TxOptions{AccessMode: pgx.ReadOnly}

func (r *pgReader) read(ctx context.Context, query string, args []any) (rowSource, error) {
	conn, tx, err := r.begin(ctx, readOnly)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, query, append([]any{pgResultFormats}, args...)...)
	if err != nil {
		r.end(ctx, conn, tx)
		return nil, classifyPG(ctx, err, false)
	}
	fields := rows.FieldDescriptions()
	src := &pgRows{r: r, ctx: ctx, conn: conn, tx: tx, rows: rows,
		names: make([]string, len(fields)), decode: make([]pgDecoder, len(fields))}
	for i, f := range fields {
		src.names[i] = f.Name
		src.decode[i] = pgDecoderFor(f.DataTypeOID, f.Format)
	}
	if err := uniqueColumns(src.names); err != nil {
		src.close()
		return nil, err
	}
	return src, nil
}

// pgRows streams a result: pgx reads each row off the connection as it is
// asked for, so the plugin holds one row at a time, and the server waits
// on the socket when the daemon reads slowly.
type pgRows struct {
	r      *pgReader
	ctx    context.Context
	conn   *pgxpool.Conn
	tx     pgx.Tx
	rows   pgx.Rows
	names  []string
	decode []pgDecoder
}

func (p *pgRows) next() (sdk.Record, bool, error) {
	if !p.rows.Next() {
		if err := p.rows.Err(); err != nil {
			return nil, false, classifyPG(p.ctx, err, false)
		}
		return nil, false, nil
	}
	raw := p.rows.RawValues()
	rec := make(sdk.Record, len(p.names))
	for i, b := range raw {
		if b == nil {
			rec[p.names[i]] = nil
			continue
		}
		v, err := p.decode[i](b)
		if err != nil {
			return nil, false, fmt.Errorf("column %q: %w", p.names[i], err)
		}
		rec[p.names[i]] = v
	}
	return rec, true, nil
}

func (p *pgRows) close() {
	p.rows.Close()
	p.r.end(p.ctx, p.conn, p.tx)
}

// classifyPG sorts a pgx error: the server's statement timeout, a
// connection or login failure (always, when connecting is true), or a
// query error.
func classifyPG(ctx context.Context, err error, connecting bool) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pgErr.Code == "57014" && strings.Contains(pgErr.Message, "statement timeout"):
			return &timeoutError{err: err}
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "28"),  // invalid authorization
			strings.HasPrefix(pgErr.Code, "57P"), // shutdown, crash, cannot connect now
			pgErr.Code == "3D000":                // no such database
			return &connectError{err: err}
		}
		if !connecting {
			return err
		}
	}
	var ce *pgconn.ConnectError
	if connecting || errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return &connectError{err: err}
	}
	return err
}

// pgResultFormats asks for the binary form of the types decoded here from
// their wire bytes, and the text form of every other type: PostgreSQL's
// text output of NUMERIC is the exact decimal, of JSON the document, of
// UUID, intervals, arrays and enums their canonical spelling.
var pgResultFormats = pgx.QueryResultFormatsByOID{
	pgtype.BoolOID:        pgx.BinaryFormatCode,
	pgtype.Int2OID:        pgx.BinaryFormatCode,
	pgtype.Int4OID:        pgx.BinaryFormatCode,
	pgtype.Int8OID:        pgx.BinaryFormatCode,
	pgtype.OIDOID:         pgx.BinaryFormatCode,
	pgtype.Float4OID:      pgx.BinaryFormatCode,
	pgtype.Float8OID:      pgx.BinaryFormatCode,
	pgtype.ByteaOID:       pgx.BinaryFormatCode,
	pgtype.TimestampOID:   pgx.BinaryFormatCode,
	pgtype.TimestamptzOID: pgx.BinaryFormatCode,
	pgtype.DateOID:        pgx.BinaryFormatCode,
}

// pgDecoder turns one non-NULL wire value into a record value. The bytes
// are only valid until the next row: a decoder copies what it keeps.
type pgDecoder func([]byte) (any, error)

// pgEpoch is PostgreSQL's zero for dates and timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgDecoderFor(oid uint32, format int16) pgDecoder {
	if format == pgx.BinaryFormatCode {
		switch oid {
		case pgtype.BoolOID:
			return fixed(1, func(b []byte) any { return b[0] != 0 })
		case pgtype.Int2OID:
			return fixed(2, func(b []byte) any { return intNumber(int64(int16(binary.BigEndian.Uint16(b)))) })
		case pgtype.Int4OID:
			return fixed(4, func(b []byte) any { return intNumber(int64(int32(binary.BigEndian.Uint32(b)))) })
		case pgtype.OIDOID:
			return fixed(4, func(b []byte) any { return intNumber(int64(binary.BigEndian.Uint32(b))) })
		case pgtype.Int8OID:
			return fixed(8, func(b []byte) any { return intNumber(int64(binary.BigEndian.Uint64(b))) })
		case pgtype.Float4OID:
			return fixed(4, func(b []byte) any { return float32Value(math.Float32frombits(binary.BigEndian.Uint32(b))) })
		case pgtype.Float8OID:
			return fixed(8, func(b []byte) any { return floatValue(math.Float64frombits(binary.BigEndian.Uint64(b))) })
		case pgtype.ByteaOID:
			return func(b []byte) (any, error) { return base64.StdEncoding.EncodeToString(b), nil }
		case pgtype.TimestampOID, pgtype.TimestamptzOID:
			// Microseconds since 2000-01-01; a timestamp without time zone
			// is read as UTC.
			return fixed(8, func(b []byte) any {
				switch us := int64(binary.BigEndian.Uint64(b)); us {
				case math.MaxInt64:
					return "infinity"
				case math.MinInt64:
					return "-infinity"
				default:
					return pgEpoch.Add(time.Duration(us) * time.Microsecond).Format(time.RFC3339Nano)
				}
			})
		case pgtype.DateOID:
			return fixed(4, func(b []byte) any {
				switch days := int32(binary.BigEndian.Uint32(b)); days {
				case math.MaxInt32:
					return "infinity"
				case math.MinInt32:
					return "-infinity"
				default:
					return pgEpoch.AddDate(0, 0, int(days)).Format(time.DateOnly)
				}
			})
		}
		return func([]byte) (any, error) {
			return nil, fmt.Errorf("binary value of type %d has no decoder", oid)
		}
	}
	switch oid {
	case pgtype.JSONOID, pgtype.JSONBOID:
		return func(b []byte) (any, error) {
			if !json.Valid(b) {
				return nil, fmt.Errorf("the server sent a JSON value that does not parse")
			}
			return json.RawMessage(append([]byte(nil), b...)), nil
		}
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		return func(b []byte) (any, error) {
			n, err := strconv.ParseInt(string(b), 10, 64)
			if err != nil {
				return nil, err
			}
			return intNumber(n), nil
		}
	case pgtype.Float4OID, pgtype.Float8OID:
		bits := 64
		if oid == pgtype.Float4OID {
			bits = 32
		}
		return func(b []byte) (any, error) {
			f, err := strconv.ParseFloat(string(b), bits)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, err
			}
			if bits == 32 {
				return float32Value(float32(f)), nil
			}
			return floatValue(f), nil
		}
	case pgtype.BoolOID:
		return func(b []byte) (any, error) { return string(b) == "t", nil }
	case pgtype.ByteaOID:
		return func(b []byte) (any, error) {
			raw, err := hex.DecodeString(strings.TrimPrefix(string(b), `\x`))
			if err != nil {
				return nil, err
			}
			return base64.StdEncoding.EncodeToString(raw), nil
		}
	}
	// NUMERIC (exact decimal text; NaN and Infinity as words), UUID, text
	// types, and everything else in PostgreSQL's own spelling.
	return func(b []byte) (any, error) { return string(b), nil }
}

// fixed checks a binary value's length before decoding it.
func fixed(n int, f func([]byte) any) pgDecoder {
	return func(b []byte) (any, error) {
		if len(b) != n {
			return nil, fmt.Errorf("binary value of %d bytes, want %d", len(b), n)
		}
		return f(b), nil
	}
}

func intNumber(n int64) any { return json.Number(strconv.FormatInt(n, 10)) }

// probe connects, checks the query compiles, and looks at what the login
// may write.
func (r *pgReader) probe(ctx context.Context, query string, _ []any) sdk.TestResult {
	start := time.Now()
	conn, tx, err := r.begin(ctx, readOnly)
	if err != nil {
		return sdk.TestResult{Message: unreachableReason(ctx, r.desc, err), Latency: time.Since(start)}
	}
	defer r.end(ctx, conn, tx)
	var one int
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return sdk.TestResult{Message: fmt.Sprintf("SELECT 1 on %s failed: %v", r.desc, err), Latency: time.Since(start)}
	}
	latency := time.Since(start)
	res := sdk.TestResult{Reachable: true, Latency: latency}
	// The unnamed statement: parsed and planned, never run, not cached.
	if _, err := tx.Conn().PgConn().Prepare(ctx, "", query, nil); err != nil {
		res.Reachable = false
		res.Message = fmt.Sprintf("connected to %s, but sql_query does not compile there: %v", r.desc, err)
		return res
	}
	res.Message = fmt.Sprintf("connected to %s (TLS: %s) in a read-only transaction; SELECT 1 answered in %s and sql_query compiles",
		r.desc, r.args.tlsMode, latency.Round(time.Microsecond))
	res.Warnings = append(res.Warnings, r.writeWarnings(ctx, tx)...)
	if r.args.tlsMode == tlsDisable && r.args.socket == "" && !isLoopback(r.args.host) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("TLS is disabled to %s, which is not on this machine: set sql_connect_args.sslmode: verify-full", r.args.host))
	}
	return res
}

// pgWritable lists the relations outside the system schemas the login may
// change, by its effective privileges (ownership and role membership
// included).
const pgWritable = `SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'f', 'm')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND (pg_catalog.has_table_privilege(c.oid, 'INSERT') OR pg_catalog.has_table_privilege(c.oid, 'UPDATE')
    OR pg_catalog.has_table_privilege(c.oid, 'DELETE') OR pg_catalog.has_table_privilege(c.oid, 'TRUNCATE'))
ORDER BY 1`

// writeWarnings says what the login could change if the adapter's other
// layers were bypassed: superuser or row-security bypass, and tables it
// may write.
func (r *pgReader) writeWarnings(ctx context.Context, tx pgx.Tx) []string {
	var warnings []string
	var super, bypassRLS bool
	if err := tx.QueryRow(ctx, "SELECT rolsuper, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = current_user").Scan(&super, &bypassRLS); err != nil {
		return []string{fmt.Sprintf("could not check the privileges of %s: %v", r.args.user, err)}
	}
	if super {
		warnings = append(warnings, fmt.Sprintf("%s is a superuser: it can write anything. The adapter only reads, in read-only transactions, but log it in as a role with SELECT only on the tables it reads", r.args.user))
	}
	rows, err := tx.Query(ctx, pgWritable)
	if err != nil {
		return append(warnings, fmt.Sprintf("could not check the table privileges of %s: %v", r.args.user, err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return append(warnings, fmt.Sprintf("could not check the table privileges of %s: %v", r.args.user, err))
	}
	if len(names) > 0 && !super {
		warnings = append(warnings, fmt.Sprintf("%s can write %d table(s) (%s): the adapter only reads, in read-only transactions, but give it a role with SELECT only (REVOKE INSERT, UPDATE, DELETE, TRUNCATE), so that nothing logged in as it can change the system of record",
			r.args.user, len(names), sample(names)))
	}
	return warnings
}

// sample lists a few names.
func sample(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
}

// count reads every count in one REPEATABLE READ, READ ONLY transaction:
// one snapshot for all tables.
func (r *pgReader) count(ctx context.Context, tables []TableName) ([]int64, error) {
	conn, tx, err := r.begin(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer r.end(ctx, conn, tx)
	counts, err := countIn(ctx, tables, `"`, func(q string) (int64, error) {
		var n int64
		err := tx.QueryRow(ctx, q).Scan(&n)
		return n, err
	})
	return counts, classifyPG(ctx, err, false)
}

// Package sql is verifierd's first-party adapter for relational systems of
// record, kind `sql`: it runs one operator-written SELECT, read-only, on
// PostgreSQL (jackc/pgx, native protocol and pool), MySQL or MariaDB
// (go-sql-driver/mysql) or an SQLite file (modernc.org/sqlite), and streams
// its rows as records for the judge. It also owns the table-delta audit
// (audit.go) that `verifyctl audit-tables` runs around a whole run.
//
// It owns three layers of read-only protection. At configure time the
// statement filter (CheckReadOnly, filter.go) refuses anything but one
// SELECT or WITH without comments, writing or locking keywords, or functions
// with side effects, read the way each engine reads quotes. Every read then
// runs inside a read-only transaction with a statement timeout derived from
// the capture's deadline: PostgreSQL BEGIN READ ONLY with SET LOCAL
// statement_timeout; MySQL/MariaDB a read-only session (so that DDL's
// implicit commit cannot escape) and START TRANSACTION READ ONLY with
// max_statement_time / max_execution_time; SQLite a mode=ro, query_only
// connection. The third layer is the operator's: a login (or a file) that
// can only read, which TestConnection checks and warns about.
//
// Configure never connects. A server that is down, a login it refuses, a
// query the server stopped at its statement timeout: each makes the
// capture unreachable (data, not an error). Once rows stream, a failure or
// a passing deadline aborts the stream with an error so the daemon discards
// the partial read. Rows are converted one at a time as the SDK consumes
// them (stream.go); no result is held whole.
//
// Configuration (the deployment's effects section):
//
//	kind: sql
//	sql_driver: postgres                      # postgres | mysql (mariadb, pymysql) | sqlite
//	sql_query: SELECT id, patient_id, type FROM encounters WHERE patient_id = %(patient)s
//	sql_query_params:
//	  patient: {param: patient_id}            # or "literal" or {literal: "x"}
//	sql_connect_args: {host: 127.0.0.1, port: 5432, user: reader, database: clinic, sslmode: verify-full}
//	sql_password_env: DB_PASSWORD             # the NAME; the daemon passes the value as secret slot "sql_password_env"
//	sqlite_database: /srv/records/clinic.db   # instead, for the sqlite driver (header checked)
//
// Placeholders are written %(name)s (as in the Python kit) or :name; they
// become driver parameters ($1.. or ?), never text spliced into the SQL.
//
// Values: NULL -> null; integers -> JSON integers; NUMERIC/DECIMAL -> the
// exact decimal text ("10.50"); floats -> the shortest number that reads
// back the same; timestamps -> RFC 3339 in UTC; dates -> YYYY-MM-DD;
// booleans -> true/false (MySQL's TINYINT(1) stays an integer); bytea and
// blobs -> base64; UUID -> text; JSON columns -> nested JSON (MariaDB's
// JSON is text on the wire and stays a string). docs/adapters/sql.md has
// the full table.
//
// The package imports only the public sdk, as a customer's adapter would;
// cmd/plugins/sql serves it as the verifier-adapter-sql binary. Its tests
// start real servers through internal/testservers/sqlservers.
package sql

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "sql"

// info describes the adapter. A database read is an independent system of
// record read; whether an effect needs a baseline is the judge's call, and
// a query's result is the whole truth of what it selects, so absence is
// proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "one read-only SELECT against a relational database (PostgreSQL, MySQL/MariaDB, SQLite)",
	// Captures share the instance's connection pool; the daemon
	// keeps at most this many in flight to one process.
	MaxConcurrentCaptures: 32,
}

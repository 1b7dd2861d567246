// Package sql is verifierd's first-party adapter for relational systems of
// record, kind `sql`: it runs one operator-written SELECT, read-only, and
// streams its rows as records for the judge.
//
// It owns three layers of read-only protection. At configure time the
// statement filter (CheckReadOnly, filter.go) refuses anything but one
// SELECT or WITH without comments, writing or locking keywords, or functions
// with side effects. Every capture then runs the query on a connection that
// is itself read-only (SQLite: mode=ro, query_only, trusted_schema off),
// inside a read-only transaction bounded by the capture's deadline. The
// third layer is the operator's: a database file or role the daemon cannot
// write, which TestConnection checks and warns about.
//
// Each capture checks that sqlite_database still names the same SQLite
// file; a file deleted or replaced since makes the capture unreachable or
// reopens the connections on the new file, never reads the old one. The
// deadline stops a query that is waiting for a lock or has not produced
// its first row yet, which the capture then reports as unreachable; once
// rows stream, a passing deadline aborts the stream with an error so the
// daemon discards the partial read. The SQLite driver cannot interrupt a
// single step that is slow between two rows (a heavy correlated subquery):
// the daemon still gives up at its deadline, but the adapter finishes that
// step in the background.
//
// Configuration (the deployment's effects section):
//
//	kind: sql
//	sqlite_database: /srv/records/clinic.db   # the SQLite file (header checked)
//	sql_driver: sqlite                        # optional; postgres and mysql are not built yet
//	sql_query: SELECT id, patient_id, type FROM encounters WHERE patient_id = %(patient)s
//	sql_query_params:
//	  patient: {param: patient_id}            # or "literal" or {literal: "x"}
//	sql_connect_args: {...}                   # accepted; for the server drivers
//	sql_password_env: DB_PASSWORD             # accepted; for the server drivers
//
// Placeholders are written %(name)s (as in the Python kit) or :name; they
// become driver parameters, never text spliced into the SQL.
//
// Values map as follows: NULL -> null; INTEGER -> a JSON integer; REAL -> the
// shortest decimal that reads back as the same float; TEXT -> a string (a
// column declared DATE, DATETIME or TIMESTAMP holding a time the driver
// parses becomes RFC 3339 in UTC); BLOB -> base64. SQLite booleans are the
// integers 0 and 1.
//
// The package imports only the public sdk, as a customer's adapter would;
// cmd/plugins/sql serves it as the verifier-adapter-sql binary.
package sql

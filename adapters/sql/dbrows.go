package sql

import (
	stdsql "database/sql"
	"fmt"

	"github.com/verifierd/verifierd/sdk"
)

// dbRows is a result set read through database/sql (the sqlite and mysql
// drivers), converted column by column.
type dbRows struct {
	conn    *stdsql.Conn // the pinned connection, when the engine needs one
	tx      *stdsql.Tx
	rows    *stdsql.Rows
	columns []string
	convert []func(any) any
	vals    []any
	ptrs    []any
}

// newDBRows wraps rows; convertFor picks each column's conversion from its
// type. On an error the caller still owns rows, tx and conn.
func newDBRows(conn *stdsql.Conn, tx *stdsql.Tx, rows *stdsql.Rows, convertFor func(*stdsql.ColumnType) func(any) any) (*dbRows, error) {
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	r := &dbRows{conn: conn, tx: tx, rows: rows, columns: make([]string, len(types)), convert: make([]func(any) any, len(types))}
	for i, ct := range types {
		r.columns[i] = ct.Name()
		r.convert[i] = convertFor(ct)
	}
	if err := uniqueColumns(r.columns); err != nil {
		return nil, err
	}
	r.vals = make([]any, len(types))
	r.ptrs = make([]any, len(types))
	for i := range r.vals {
		r.ptrs[i] = &r.vals[i]
	}
	return r, nil
}

func (r *dbRows) next() (sdk.Record, bool, error) {
	if !r.rows.Next() {
		return nil, false, r.rows.Err()
	}
	if err := r.rows.Scan(r.ptrs...); err != nil {
		return nil, false, err
	}
	rec := make(sdk.Record, len(r.columns))
	for i, name := range r.columns {
		rec[name] = r.convert[i](r.vals[i])
		r.vals[i] = nil
	}
	return rec, true, nil
}

func (r *dbRows) close() {
	if r.rows != nil {
		r.rows.Close()
	}
	if r.tx != nil {
		r.tx.Rollback()
	}
	if r.conn != nil {
		r.conn.Close()
	}
}

// uniqueColumns refuses a result whose columns cannot all be record fields.
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
